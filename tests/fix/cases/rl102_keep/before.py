import torch


class WorkspaceKernel:
    def process_weights_after_loading(self, layer):
        # Allocate the workspace.
        self.workspace = torch.zeros(
            8,
            dtype=torch.int32,
        )

    def apply_weights(self, layer, x):
        return x + self.workspace
