import torch


class WorkspaceKernel:
    def process_weights_after_loading(self, layer):
        # Allocate the workspace.
        workspace = torch.zeros(
            8,
            dtype=torch.int32,
        )
        if getattr(self, "workspace", None) is not None:
            if (
                self.workspace.shape == workspace.shape
                and self.workspace.dtype == workspace.dtype
                and self.workspace.device == workspace.device
            ):
                self.workspace.copy_(workspace)
            else:
                self.workspace = workspace
        else:
            self.workspace = workspace

    def apply_weights(self, layer, x):
        return x + self.workspace
