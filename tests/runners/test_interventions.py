"""The hooks of a unit patch on every layer type, against the patch written out by hand: the reference's mean taken
and the units replaced along the right dim (a Conv3d's channels keep their map, a Linear's features, a transformer's
tokens take their mean over real tokens, an attention head its slice of the output projection's input)."""

from __future__ import annotations

import torch
from torch import nn

from analysis.intervention import HEADS, UnitPatch
from models.attention_classifier import MultiHeadSelfAttention
from runners.interventions import Mean, Patch, patch_site, reduced


def patched(model: nn.Module, patch: UnitPatch, reference: dict, batch: dict, run) -> torch.Tensor:
    """The site's tensor in ``run(model, batch)`` with the patch whose mean the reference gave."""
    site = patch_site(model, patch)
    total = Mean(patch.module)
    handle = site.watch(lambda tensor: total.add(reduced(site, tensor, reference)))
    with torch.no_grad():
        run(model, reference)
    handle.remove()
    hook = Patch(patch, site, total.mean())
    hook.inputs = batch
    seen = []
    handle = site.watch(lambda tensor: seen.append(hook(tensor)) or seen[-1])
    with torch.no_grad():
        run(model, batch)
    handle.remove()
    return seen[0]


def test_a_conv3d_patch_sets_its_channels_to_their_mean_map():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1))
    reference, batch = {"x": torch.randn(5, 2, 3, 4, 4)}, {"x": torch.randn(3, 2, 3, 4, 4)}
    out = patched(model, UnitPatch("0", (1, 3)), reference, batch, lambda m, inputs: m(inputs["x"]))
    with torch.no_grad():
        expected = model(batch["x"])
        expected[:, [1, 3]] = model(reference["x"]).mean(dim=0)[[1, 3]]
    torch.testing.assert_close(out, expected)


def test_a_linear_patch_sets_its_features_and_on_tokens_their_mean_over_real_tokens():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 5))
    reference, batch = {"x": torch.randn(4, 6)}, {"x": torch.randn(3, 6)}
    out = patched(model, UnitPatch("0", (2,)), reference, batch, lambda m, inputs: m(inputs["x"]))
    with torch.no_grad():
        expected = model(batch["x"])
        expected[:, 2] = model(reference["x"])[:, 2].mean()
    torch.testing.assert_close(out, expected)

    real = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    tokens = {"x": torch.randn(3, 4, 6), "attention_mask": real}
    later = {"x": torch.randn(2, 7, 6), "attention_mask": torch.ones(2, 7, dtype=torch.long)}  # another length
    out = patched(model, UnitPatch("0", (0, 4)), tokens, later, lambda m, inputs: m(inputs["x"]))
    with torch.no_grad():
        features = model(tokens["x"])
        per_datapoint = torch.stack([features[i][real[i].bool()].mean(dim=0) for i in range(3)])
        expected = model(later["x"])
        expected[..., [0, 4]] = per_datapoint.mean(dim=0)[[0, 4]]
    torch.testing.assert_close(out, expected)


def test_an_attention_head_is_its_slice_of_the_output_projections_input():
    torch.manual_seed(2)
    model = nn.ModuleDict({"attn": MultiHeadSelfAttention(8, 4, "attn")})

    def run(m, inputs):
        return m["attn"](inputs["x"], (1, inputs["x"].shape[1]))
    reference, batch = {"x": torch.randn(3, 5, 8)}, {"x": torch.randn(2, 5, 8)}
    site = patch_site(model, UnitPatch("attn", (2,), kind=HEADS))
    assert site.module is model["attn"].proj and site.on_input and site.channels == [4, 5]
    out = patched(model, UnitPatch("attn", (2,), kind=HEADS), reference, batch, run)
    kept = []
    handle = model["attn"].proj.register_forward_pre_hook(lambda module, args: kept.append(args[0]))
    with torch.no_grad():
        run(model, reference)
        run(model, batch)
    handle.remove()
    expected = kept[1].clone()
    expected[..., 4:6] = kept[0].mean(dim=1).mean(dim=0)[4:6]
    torch.testing.assert_close(out, expected)
