"""Models, as torch modules whose parameters are kept stacked over clients.

* ``simplecnn-mnist`` (spec): conv 1->6 k5, ReLU, maxpool 2, conv 6->16 k5, ReLU, maxpool 2,
  fc 256->120, ReLU, fc 120->84, ReLU, fc 84->10: 44,426 parameters for 28x28 inputs.
* ``simplecnn-cifar``: the same layers on 3x32x32 colour images (conv 3->6, fc 400->120):
  62,006 parameters, the LeNet-style CNN of the iPFL paper's CIFAR-10 runs.
* ``mlp``: flatten, fc d->hidden, ReLU, fc hidden->classes.
* ``logreg``: multinomial logistic regression (one linear layer).
"""

from __future__ import annotations

import torch
from torch import nn

from mechanisms.errors import MarketInputError

__all__ = ["AUTO", "MODELS", "auto", "build", "flatten_params", "init_stacked", "n_params"]

MODELS = ("simplecnn-mnist", "simplecnn-cifar", "mlp", "logreg")
AUTO = {"fashion-mnist": "simplecnn-mnist", "cifar10": "simplecnn-cifar", "digits": "mlp"}


def auto(dataset: str) -> str:
    """The model ``model="auto"`` picks for a data set (logistic regression by default)."""
    return AUTO.get(dataset, "logreg")


class SimpleCNN(nn.Module):
    def __init__(self, classes: int = 10, side: int = 28, channels: int = 1):
        super().__init__()
        need = {1: 28, 3: 32}
        if need.get(channels) != side:
            name = "simplecnn-mnist" if channels == 1 else "simplecnn-cifar"
            raise MarketInputError("model", f"{name} needs {channels}x{need.get(channels)}x"
                                            f"{need.get(channels)} images, got {channels}x"
                                            f"{side}x{side}")
        self.conv1 = nn.Conv2d(channels, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        flat = 16 * (((side - 4) // 2 - 4) // 2) ** 2
        self.fc1 = nn.Linear(flat, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = x.flatten(-3)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class MLP(nn.Module):
    def __init__(self, d_in: int, classes: int, hidden: int = 64):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x.flatten(1) if x.dim() > 1 else x)))


class LogReg(nn.Module):
    def __init__(self, d_in: int, classes: int):
        super().__init__()
        self.fc = nn.Linear(d_in, classes)

    def forward(self, x):
        return self.fc(x.flatten(1) if x.dim() > 1 else x)


def build(name: str, input_shape: tuple, classes: int) -> nn.Module:
    d_in = 1
    for s in input_shape:
        d_in *= int(s)
    if name == "simplecnn-mnist":
        return SimpleCNN(classes, side=int(input_shape[-1]), channels=1)
    if name == "simplecnn-cifar":
        if len(input_shape) != 3 or int(input_shape[0]) != 3:
            raise MarketInputError("model", f"simplecnn-cifar needs 3x32x32 images, got "
                                            f"{'x'.join(map(str, input_shape))}")
        return SimpleCNN(classes, side=int(input_shape[-1]), channels=3)
    if name == "mlp":
        return MLP(d_in, classes)
    if name == "logreg":
        return LogReg(d_in, classes)
    raise MarketInputError("model", f"unknown {name!r}; choose one of {MODELS}")


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def init_stacked(model: nn.Module, m: int) -> dict[str, torch.Tensor]:
    """Every client starts from the same initial model (the module's own parameters)."""
    return {k: v.detach().unsqueeze(0).repeat(m, *([1] * v.dim())).clone()
            for k, v in model.named_parameters()}


def flatten_params(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """(m, p) matrix of all clients' parameters (the uploads the market compares)."""
    return torch.cat([v.reshape(v.shape[0], -1) for v in params.values()], dim=1)


def unflatten_params(flat: torch.Tensor, like: dict[str, torch.Tensor]):
    out, at = {}, 0
    for k, v in like.items():
        n = v[0].numel()
        out[k] = flat[:, at:at + n].reshape(flat.shape[0], *v.shape[1:]).contiguous()
        at += n
    return out
