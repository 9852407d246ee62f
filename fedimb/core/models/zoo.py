"""Backbones of the source papers. Where a paper leaves a detail open, the docstring
names the convention we chose."""

from __future__ import annotations

import math

import torch
from torch import nn

from fedimb.core.models.base import EncoderHeadNet, flat_size


def conv_pool(c_in: int, c_out: int, kernel: int, padding: int) -> list[nn.Module]:
    """One conv-pool pair of the ReBaFL CNNs: conv (stride 1), ReLU, 2x2 max-pooling."""
    return [nn.Conv2d(c_in, c_out, kernel, padding=padding), nn.ReLU(), nn.MaxPool2d(2)]


def dense_encoder(
    body: nn.Sequential, input_shape: tuple[int, ...], width: int, num_classes: int
) -> EncoderHeadNet:
    """``body`` followed by one dense ReLU layer of ``width`` as the encoder, and a
    linear head over it."""
    encoder = nn.Sequential(body, nn.Linear(flat_size(body, input_shape), width), nn.ReLU())
    return EncoderHeadNet(encoder, width, num_classes)


def cnn28(input_shape: tuple[int, ...], num_classes: int) -> EncoderHeadNet:
    """ReBaFL's Fashion-MNIST CNN (§5.1): two conv-pool pairs (16, 32 channels), FC 128,
    FC C. Kernel 5x5 with padding 2 and 2x2 max-pooling follow LeNet-5 (not stated)."""
    c = input_shape[0]
    body = nn.Sequential(*conv_pool(c, 16, 5, 2), *conv_pool(16, 32, 5, 2), nn.Flatten())
    return dense_encoder(body, input_shape, 128, num_classes)


def cnn32(input_shape: tuple[int, ...], num_classes: int) -> EncoderHeadNet:
    """ReBaFL's CIFAR-10 CNN: as :func:`cnn28` plus a third 64-channel conv-pool pair
    (3x3, padding 1; kernel not stated)."""
    c = input_shape[0]
    body = nn.Sequential(
        *conv_pool(c, 16, 5, 2), *conv_pool(16, 32, 5, 2), *conv_pool(32, 64, 3, 1), nn.Flatten()
    )
    return dense_encoder(body, input_shape, 128, num_classes)


def astraea_cnn(input_shape: tuple[int, ...], num_classes: int) -> EncoderHeadNet:
    """Astraea's EMNIST CNN (§2.3): conv 12 (5x5, stride 2), conv 18 (3x3, stride 2),
    dropout 0.5, conv 24 (2x2, stride 1), flatten, dense 150 (ReLU), softmax layer.
    Valid padding and ReLU after every conv reproduce the stated 68,873 parameters for
    47 classes on 28x28 input."""
    c = input_shape[0]
    body = nn.Sequential(
        nn.Conv2d(c, 12, 5, stride=2),
        nn.ReLU(),
        nn.Conv2d(12, 18, 3, stride=2),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Conv2d(18, 24, 2, stride=1),
        nn.ReLU(),
        nn.Flatten(),
    )
    return dense_encoder(body, input_shape, 150, num_classes)


def mclr(
    input_shape: tuple[int, ...], num_classes: int, encoder: str = "identity"
) -> EncoderHeadNet:
    """Multinomial logistic regression, the convex model of FedProx (§5.1) and q-FFL on the
    Synthetic data sets: softmax(W x + b).

    ``encoder="identity"`` (the papers' model): the encoder only flattens, so the features
    are the inputs and the head is the model's one linear layer; methods that work on
    features (ReBaFL's prototypes, contribution normalisation) see the inputs themselves.
    ``encoder="linear"``: a d x d linear layer before the head, initialised to the identity
    (so the initial model is the identity variant's), for methods that train or swap the
    encoder apart from the head (FedBABU, FedConcat, GRP-FED); the logits stay linear in x,
    but the objective is no longer convex in the parameters."""
    width = math.prod(input_shape)
    if encoder == "identity":
        return EncoderHeadNet(nn.Flatten(), width, num_classes)
    if encoder != "linear":
        raise ValueError(f"mclr encoder must be identity or linear, got {encoder!r}")
    layer = nn.Linear(width, width)
    with torch.no_grad():
        layer.weight.copy_(torch.eye(width))
        layer.bias.zero_()
    return EncoderHeadNet(nn.Sequential(nn.Flatten(), layer), width, num_classes)


def mlp(
    input_shape: tuple[int, ...], num_classes: int, hidden: tuple[int, ...] = (128, 64)
) -> EncoderHeadNet:
    """A fully connected network for small inputs such as ``digits`` (8x8)."""
    layers: list[nn.Module] = [nn.Flatten()]
    width = 1
    for d in input_shape:
        width *= d
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    return EncoderHeadNet(nn.Sequential(*layers), width, num_classes)


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


def resnet(input_shape: tuple[int, ...], num_classes: int, depth: int = 8) -> EncoderHeadNet:
    """A CIFAR-style ResNet (He et al. 2016, §4.2): depth 6n+2, stages of 16/32/64
    channels, global average pooling; ``depth=8`` is the small default for 32x32 input."""
    if (depth - 2) % 6 != 0 or depth < 8:
        raise ValueError(f"resnet depth must be 6n+2 >= 8, got {depth}")
    n = (depth - 2) // 6
    layers: list[nn.Module] = [
        nn.Conv2d(input_shape[0], 16, 3, 1, 1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
    ]
    cin = 16
    for stage, cout in enumerate((16, 32, 64)):
        for block in range(n):
            layers.append(_BasicBlock(cin, cout, 2 if stage > 0 and block == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return EncoderHeadNet(nn.Sequential(*layers), 64, num_classes)


def ecg_cnn1d(input_shape: tuple[int, ...], num_classes: int) -> EncoderHeadNet:
    """A 1-D CNN for single-lead ECG beats (input ``(1, length)``): three conv blocks
    (16/32/64 channels) and global average pooling to a 64-d feature."""
    encoder = nn.Sequential(
        nn.Conv1d(input_shape[0], 16, 7, padding=3),
        nn.BatchNorm1d(16),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(16, 32, 5, padding=2),
        nn.BatchNorm1d(32),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(32, 64, 3, padding=1),
        nn.BatchNorm1d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
    )
    return EncoderHeadNet(encoder, 64, num_classes)


class CharEncoder(nn.Module):
    """Character numbers (N, L) -> an embedding per character -> stacked LSTM -> the top
    layer's output after the last character (N, hidden)."""

    def __init__(self, vocabulary: int, embedding: int, hidden: int, layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, embedding)
        self.lstm = nn.LSTM(embedding, hidden, num_layers=layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_floating_point():
            raise TypeError(
                f"char_lstm reads character numbers (an integer tensor), got {x.dtype} inputs"
            )
        out, _ = self.lstm(self.embedding(x.long()))
        return out[:, -1]


def char_lstm(
    input_shape: tuple[int, ...],
    num_classes: int,
    embedding: int = 8,
    hidden: int = 128,
    layers: int = 2,
) -> EncoderHeadNet:
    """LEAF's Shakespeare model (``models/shakespeare/stacked_lstm.py``; McMahan et al.,
    2017): an 8-dimensional embedding of each character, a stack of two LSTM layers and a
    linear layer over the top layer's last output, one logit per character of the
    vocabulary (``num_classes``: the next character's vocabulary is the input's). LEAF's
    layers have 256 units; 128 (a quarter of the multiply-adds) suit a CPU, and
    ``model.hidden=256`` gives LEAF's model."""
    if len(input_shape) != 1:
        raise ValueError(f"char_lstm reads sequences of character numbers, not {input_shape}")
    return EncoderHeadNet(CharEncoder(num_classes, embedding, hidden, layers), hidden, num_classes)
