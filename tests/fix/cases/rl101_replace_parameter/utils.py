import torch


def replace_parameter(layer, param_name, new_data, prefer_copy=False):
    old = getattr(layer, param_name, None)
    if prefer_copy and old is not None and old.shape == new_data.shape:
        old.copy_(new_data)
        return
    layer.register_parameter(param_name, torch.nn.Parameter(new_data, requires_grad=False))
