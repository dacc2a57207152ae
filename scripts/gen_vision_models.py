#!/usr/bin/env python3
"""Vision models exported by PyTorch for tests/test_vision_models.c.

Writes, for each model, OUT/<name>/model.onnx (dynamic batch dim "N" on the
input and the output) and, for every batch size B, input_bB.npy and
output_bB.npy (PyTorch's f32 output for that input: the reference).

The architectures are written here (Debian's python3-torch has no
torchvision) after the torchvision definitions: ResNet-18 (BasicBlock) and
ResNet-50 (Bottleneck), MobileNetV2 (inverted residuals, ReLU6),
MobileNetV3 small and large (hardswish, squeeze-excite with hardsigmoid), a
small ViT (patch-embedding conv, class token, position embedding, pre-LN
encoder blocks, GELU MLP) and two small U-Nets (conv blocks + max-pool
down; up through ConvTranspose2d, bilinear and nearest F.interpolate in
"unet", through ConvTranspose2d at every level in "unet_convt"; skip
concats). Weights: torch.manual_seed + each module's default init (the
torchvision init for ResNet/MobileNet), then BatchNorm affine parameters
and running statistics set to seeded non-trivial values so no BatchNorm is
an identity; model.eval().

  --size ci    32x32 images, a small ViT: the CI set (CPU, lavapipe)
  --size full  224x224 images, ViT-Tiny widths: the GPU machine

The big weights (ResNet-50 is ~100 MB) are never committed: the test runs
this script into the build directory. A stamp file records a hash of this
script and the arguments, so an unchanged request returns at once. Exits 77
(a skip for ctest) when torch cannot be imported.
"""
import argparse
import hashlib
import inspect
import os
import sys
import warnings

SKIP = 77


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--size", choices=["ci", "full"], default="ci")
    p.add_argument("--batches", default="1,3", help="comma-separated batch sizes")
    p.add_argument("--models", default="all", help="comma-separated names, or all")
    p.add_argument("--opset", type=int, default=13)
    return p.parse_args()


# ----------------------------------------------------------------- models
# Defined inside a function so that importing torch (and failing) happens
# only after the argument parsing and the stamp check.

def define_models(torch):
    nn = torch.nn
    F = torch.nn.functional

    def make_divisible(v, divisor=8):
        # torchvision's _make_divisible: round channels to a multiple of 8,
        # never dropping more than 10%.
        new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
        if new_v < 0.9 * v:
            new_v += divisor
        return new_v

    def conv_bn_act(cin, cout, k, stride=1, groups=1, act=nn.ReLU):
        layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        if act is not None:
            layers.append(act(inplace=True))
        return nn.Sequential(*layers)

    # ---- ResNet
    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, cin, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + idt)

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            # stride on the 3x3 conv, as torchvision's ResNet v1.5
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + idt)

    class ResNet(nn.Module):
        def __init__(self, block, layers, num_classes=1000):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._layer(block, 64, layers[0], 1)
            self.layer2 = self._layer(block, 128, layers[1], 2)
            self.layer3 = self._layer(block, 256, layers[2], 2)
            self.layer4 = self._layer(block, 512, layers[3], 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512 * block.expansion, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def _layer(self, block, planes, blocks, stride):
            down = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                down = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * block.expansion))
            layers = [block(self.inplanes, planes, stride, down)]
            self.inplanes = planes * block.expansion
            layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    # ---- MobileNetV2
    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = int(round(cin * expand))
            self.use_res = stride == 1 and cin == cout
            layers = []
            if expand != 1:
                layers.append(conv_bn_act(cin, hidden, 1, act=nn.ReLU6))
            layers += [conv_bn_act(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                       nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self, num_classes=1000):
            super().__init__()
            settings = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                        [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
            cin = 32
            layers = [conv_bn_act(3, cin, 3, 2, act=nn.ReLU6)]
            for t, c, n, s in settings:
                for i in range(n):
                    layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            layers.append(conv_bn_act(cin, 1280, 1, act=nn.ReLU6))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
            init_mobilenet(self)

        def forward(self, x):
            x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(torch.flatten(x, 1))

    def init_mobilenet(model):
        # torchvision's MobileNet init
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    # ---- MobileNetV3
    class SqueezeExcite(nn.Module):
        def __init__(self, cin, squeeze):
            super().__init__()
            self.fc1 = nn.Conv2d(cin, squeeze, 1)
            self.fc2 = nn.Conv2d(squeeze, cin, 1)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            s = F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))
            return x * s

    class V3Block(nn.Module):
        def __init__(self, cin, k, exp, cout, se, act, stride):
            super().__init__()
            self.use_res = stride == 1 and cin == cout
            layers = []
            if exp != cin:
                layers.append(conv_bn_act(cin, exp, 1, act=act))
            layers.append(conv_bn_act(exp, exp, k, stride, groups=exp, act=act))
            if se:
                layers.append(SqueezeExcite(exp, make_divisible(exp // 4)))
            layers.append(conv_bn_act(exp, cout, 1, act=None))
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.block(x) if self.use_res else self.block(x)

    class MobileNetV3(nn.Module):
        def __init__(self, arch, num_classes=1000):
            super().__init__()
            RE, HS = nn.ReLU, nn.Hardswish
            if arch == "small":  # cin, kernel, expanded, cout, SE, activation, stride
                cfg = [(16, 3, 16, 16, 1, RE, 2), (16, 3, 72, 24, 0, RE, 2),
                       (24, 3, 88, 24, 0, RE, 1), (24, 5, 96, 40, 1, HS, 2),
                       (40, 5, 240, 40, 1, HS, 1), (40, 5, 240, 40, 1, HS, 1),
                       (40, 5, 120, 48, 1, HS, 1), (48, 5, 144, 48, 1, HS, 1),
                       (48, 5, 288, 96, 1, HS, 2), (96, 5, 576, 96, 1, HS, 1),
                       (96, 5, 576, 96, 1, HS, 1)]
                last = 1024
            else:
                cfg = [(16, 3, 16, 16, 0, RE, 1), (16, 3, 64, 24, 0, RE, 2),
                       (24, 3, 72, 24, 0, RE, 1), (24, 5, 72, 40, 1, RE, 2),
                       (40, 5, 120, 40, 1, RE, 1), (40, 5, 120, 40, 1, RE, 1),
                       (40, 3, 240, 80, 0, HS, 2), (80, 3, 200, 80, 0, HS, 1),
                       (80, 3, 184, 80, 0, HS, 1), (80, 3, 184, 80, 0, HS, 1),
                       (80, 3, 480, 112, 1, HS, 1), (112, 3, 672, 112, 1, HS, 1),
                       (112, 5, 672, 160, 1, HS, 2), (160, 5, 960, 160, 1, HS, 1),
                       (160, 5, 960, 160, 1, HS, 1)]
                last = 1280
            layers = [conv_bn_act(3, 16, 3, 2, act=HS)]
            layers += [V3Block(*c) for c in cfg]
            lastconv = 6 * cfg[-1][3]
            layers.append(conv_bn_act(cfg[-1][3], lastconv, 1, act=HS))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Linear(lastconv, last), nn.Hardswish(inplace=True),
                                            nn.Dropout(0.2), nn.Linear(last, num_classes))
            init_mobilenet(self)

        def forward(self, x):
            x = F.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    # ---- ViT
    class SelfAttention(nn.Module):
        """nn.MultiheadAttention's math (one in-projection for q, k, v,
        softmax(q k^T / sqrt(d)) v, out-projection), written out: torch 1.13
        cannot export the module's fused eval path."""

        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            n, t, c = x.shape
            qkv = self.qkv(x).reshape(n, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = torch.softmax(q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5, dim=-1)
            return self.proj((att @ v).transpose(1, 2).reshape(n, t, c))

    class EncoderBlock(nn.Module):
        def __init__(self, dim, heads, mlp):
            super().__init__()
            self.ln1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = SelfAttention(dim, heads)
            self.ln2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

        def forward(self, x):
            y = self.ln1(x)
            x = x + self.attn(y)
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self, image, patch, dim, depth, heads, mlp, num_classes=1000):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, patch, patch)
            tokens = (image // patch) ** 2 + 1
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.empty(1, tokens, dim).normal_(std=0.02))
            self.blocks = nn.Sequential(*[EncoderBlock(dim, heads, mlp) for _ in range(depth)])
            self.ln = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, num_classes)
            # a non-zero class token, so it is not a no-op in the test
            nn.init.normal_(self.cls_token, std=0.02)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat([cls, x], dim=1) + self.pos_embed
            x = self.ln(self.blocks(x))
            return self.head(x[:, 0])

    # ---- U-Net
    class DoubleConv(nn.Sequential):
        def __init__(self, cin, cout):
            super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True))

    class UNet(nn.Module):
        """Three levels down (max-pool), three up: ConvTranspose2d at the
        deepest, bilinear (align_corners=False) and nearest interpolation
        above (all_convt: ConvTranspose2d at every level, the classic
        U-Net, which needs no Resize); each up step concatenates the skip
        from its level."""

        def __init__(self, base, classes=2, all_convt=False):
            super().__init__()
            self.all_convt = all_convt
            c1, c2, c3, c4 = base, base * 2, base * 4, base * 8
            self.inc = DoubleConv(3, c1)
            self.down1 = DoubleConv(c1, c2)
            self.down2 = DoubleConv(c2, c3)
            self.down3 = DoubleConv(c3, c4)
            self.up3 = nn.ConvTranspose2d(c4, c3, 2, 2)
            self.conv3 = DoubleConv(c3 * 2, c3)
            self.conv2 = DoubleConv(c3 + c2, c2)
            self.conv1 = DoubleConv(c2 + c1, c1)
            self.outc = nn.Conv2d(c1, classes, 1)
            if all_convt:
                self.up2 = nn.ConvTranspose2d(c3, c3, 2, 2)
                self.up1 = nn.ConvTranspose2d(c2, c2, 2, 2)

        def forward(self, x):
            x1 = self.inc(x)
            x2 = self.down1(F.max_pool2d(x1, 2))
            x3 = self.down2(F.max_pool2d(x2, 2))
            x4 = self.down3(F.max_pool2d(x3, 2))
            y = self.conv3(torch.cat([x3, self.up3(x4)], 1))
            if self.all_convt:
                y = self.up2(y)
            else:
                y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
            y = self.conv2(torch.cat([x2, y], 1))
            if self.all_convt:
                y = self.up1(y)
            else:
                y = F.interpolate(y, scale_factor=2.0, mode="nearest")
            y = self.conv1(torch.cat([x1, y], 1))
            return self.outc(y)

    def vit(size):
        if size == "ci":
            return ViT(32, 8, 64, 2, 4, 128)
        return ViT(224, 16, 192, 6, 3, 768)  # ViT-Tiny widths, 6 of its 12 blocks

    return {
        "resnet18": lambda size: ResNet(BasicBlock, [2, 2, 2, 2]),
        "resnet50": lambda size: ResNet(Bottleneck, [3, 4, 6, 3]),
        "mobilenet_v2": lambda size: MobileNetV2(),
        "mobilenet_v3_small": lambda size: MobileNetV3("small"),
        "mobilenet_v3_large": lambda size: MobileNetV3("large"),
        "vit": vit,
        "unet": lambda size: UNet(16 if size == "ci" else 32),
        "unet_convt": lambda size: UNet(16 if size == "ci" else 32, all_convt=True),
    }


MODEL_ORDER = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small",
               "mobilenet_v3_large", "vit", "unet", "unet_convt"]


def seed_batchnorm(torch, model, gen):
    """Non-trivial BatchNorm: scale in [0.5, 1.5], shift ~ 0.1 N(0,1), running
    mean ~ 0.1 N(0,1), running variance in [0.5, 1.5] (seeded)."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)


def export_one(torch, np, name, builder, args, out_dir):
    image = 32 if args.size == "ci" else 224
    torch.manual_seed(1234 + MODEL_ORDER.index(name))
    model = builder(args.size)
    seed_batchnorm(torch, model, torch.Generator().manual_seed(99))
    model.eval()
    os.makedirs(out_dir, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for b in batches:
            x = torch.randn(b, 3, image, image, generator=gen)
            y = model(x)
            np.save(os.path.join(out_dir, "input_b%d.npy" % b), x.numpy().astype(np.float32))
            np.save(os.path.join(out_dir, "output_b%d.npy" % b), y.numpy().astype(np.float32))
        example = torch.randn(batches[0], 3, image, image, generator=gen)
        tmp = os.path.join(out_dir, "model.onnx.tmp")
        kwargs = {}
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            # torch >= 2.9 defaults to the dynamo exporter (which needs
            # onnxscript); the TorchScript exporter is the one dynamic_axes
            # belongs to, and the one Debian's torch 1.13 has
            kwargs["dynamo"] = False
        torch.onnx.export(model, example, tmp, opset_version=args.opset,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, **kwargs)
        os.replace(tmp, os.path.join(out_dir, "model.onnx"))
    mb = os.path.getsize(os.path.join(out_dir, "model.onnx")) / 1e6
    print("%-20s %3dx%-3d batches %-8s %7.1f MB" % (name, image, image, args.batches, mb))


def request_hash(args, names):
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    h.update(repr((args.size, args.batches, names, args.opset)).encode())
    return h.hexdigest()


def main():
    args = parse_args()
    names = MODEL_ORDER if args.models == "all" else args.models.split(",")
    for n in names:
        if n not in MODEL_ORDER:
            sys.exit("unknown model %r (known: %s)" % (n, ", ".join(MODEL_ORDER)))
    os.makedirs(args.out, exist_ok=True)
    stamp = os.path.join(args.out, "STAMP")
    want = request_hash(args, names)
    import fcntl
    # Several ctest entries (cpu, vulkan, webgpu) may ask at once: one
    # generates, the others wait for it and then find the stamp.
    with open(os.path.join(args.out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(stamp) and open(stamp).read().strip() == want:
            print("vision models up to date in", args.out)
            return 0
        try:
            import numpy as np
            import torch
        except ImportError as e:
            print("SKIP: PyTorch/numpy not importable (%s): install python3-torch" % e)
            return SKIP
        # torch's exporter warns about every dynamic-shape construct; the
        # test's log should show the models, not those
        warnings.filterwarnings("ignore")
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
        models = define_models(torch)
        for n in names:
            export_one(torch, np, n, models[n], args, os.path.join(args.out, n))
        with open(stamp, "w") as f:
            f.write(want + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
