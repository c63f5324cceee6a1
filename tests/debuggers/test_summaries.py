"""Each ready-made debugger's summaries, as the epoch table collects them (``summary_columns`` of each batch) and as
``summary()`` gives them for a datapoint read back from real pages, against NumPy computations of each datapoint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.attention_debugger import AttentionDebugger
from debuggers.batch_split import split_batch
from debuggers.capture_debugger import CaptureDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger, cam_spatial_stats
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from tests.compat.architectures import SeqFirstClassifier, TinyResNet
from tests.compat.harness import capture
from tests.debuggers.library import entry, run_batches_with_columns

DEBUGGERS = {
    "stats": (ActivationStatsDebugger, {"layer_name": "layer2.bn1"}),
    "features": (FeatureMapDebugger, {"layer_name": "layer1"}),
    "output": (LayerOutputDebugger, {"layer_name": "layer1", "downsample_factor": 100}),
    "cam": (GradCAMDebugger, {"target_layer": "layer2"}),
    "gradients": (GradientFlowDebugger, {"layer_types": ["Conv2d", "Linear"]}),
    "captured": (CaptureDebugger, {}),
    "nan": (NaNInfDebugger, {}),
}


@pytest.fixture(scope="module")
def resnet_run(tmp_path_factory):
    torch.manual_seed(0)
    model = TinyResNet().eval()
    images = torch.randn(3, 3, 12, 12)
    images[2, 0, 0, 0] = math.nan  # one datapoint with a NaN input: the stem's conv is the first to show it
    batches = [{"inputs": {"image": images}, "labels": {"class": torch.tensor([0, 1, 2])},
                "meta_info": {"idx": torch.arange(3)}}]
    outputs = capture(model, batches, tmp_path_factory.mktemp("run"),
                      [entry(name, cls, **args) for name, (cls, args) in DEBUGGERS.items()])
    debuggers = {name: cls(**args) for name, (cls, args) in DEBUGGERS.items()}
    return model, images, outputs, debuggers


def layer_output(model, name, images):
    kept = []
    handle = dict(model.named_modules())[name].register_forward_hook(lambda m, a, out: kept.append(out.clone()))
    with torch.no_grad():
        model({"image": images})
    handle.remove()
    return kept[-1].double().numpy()


def test_every_summary_is_a_small_dict_of_floats(resnet_run):
    _, _, outputs, debuggers = resnet_run
    for name, debugger in debuggers.items():
        summary = debugger.summary(outputs[0][name])
        assert summary and len(summary) <= 16 and all(isinstance(v, float) for v in summary.values()), name


def test_activation_stats_feature_map_and_layer_output(resnet_run):
    model, images, outputs, debuggers = resnet_run
    bn1 = layer_output(model, "layer2.bn1", images[:2])
    layer1 = layer_output(model, "layer1", images[:2])
    for i in range(2):
        stats = debuggers["stats"].summary(outputs[i]["stats"])
        assert stats["mean"] == pytest.approx(bn1[i].mean(), rel=1e-5)
        assert stats["std"] == pytest.approx(bn1[i].std(), rel=1e-5)
        assert stats["sparsity"] == pytest.approx((bn1[i] == 0).mean())
        assert stats["l2_norm"] == pytest.approx(np.linalg.norm(bn1[i]), rel=1e-5)
        features = debuggers["features"].summary(outputs[i]["features"])
        assert features["energy"] == pytest.approx((layer1[i] ** 2).mean(), rel=1e-5)
        assert features["dead_channel_fraction"] == pytest.approx((~layer1[i].reshape(8, -1).any(1)).mean())
        assert features["strongest_channel"] == float(layer1[i].reshape(8, -1).mean(1).argmax())
        pooled = layer1[i].mean(axis=(1, 2))  # downsample_factor beyond the map: one cell per channel
        assert debuggers["output"].summary(outputs[i]["output"])["pooled_norm"] == pytest.approx(
            np.linalg.norm(pooled), rel=1e-5)
        assert outputs[i]["output"]["output"].reshape(-1).shape == (8,)  # the pooled feature vector


def test_where_the_mass_of_known_cams_lies():
    hot = torch.zeros(4, 4)
    hot[1, 3] = 1.0
    stats = {key: value.tolist() for key, value in cam_spatial_stats(torch.stack([hot, torch.ones(4, 4),
                                                                                 torch.zeros(4, 4)])).items()}
    assert stats["centroid_x"][0] == 3.5 / 4 and stats["centroid_y"][0] == 1.5 / 4
    assert stats["spread"][0] == 0 and stats["entropy"][0] == pytest.approx(0) and stats["centre_fraction"][0] == 0
    coords = (np.arange(4) + 0.5) / 4
    assert stats["centroid_x"][1] == stats["centroid_y"][1] == pytest.approx(0.5)
    assert stats["entropy"][1] == pytest.approx(1.0) and stats["centre_fraction"][1] == pytest.approx(0.25)
    assert stats["spread"][1] == pytest.approx(math.sqrt(2 * ((coords - 0.5) ** 2).mean()))
    assert all(math.isnan(values[2]) for values in stats.values())  # an all-zero cam has no mass


def test_gradcam_summary_of_a_real_capture(resnet_run):
    _, _, outputs, debuggers = resnet_run
    cam = outputs[0]["cam"]["cam"].astype(np.float64)
    p = cam / cam.sum()
    ys, xs = ((np.arange(n) + 0.5) / n for n in cam.shape)
    summary = debuggers["cam"].summary(outputs[0]["cam"])
    assert summary["centroid_x"] == pytest.approx(float((p.sum(0) * xs).sum()))
    assert summary["centroid_y"] == pytest.approx(float((p.sum(1) * ys).sum()))
    assert summary["entropy"] == pytest.approx(float(-(p[p > 0] * np.log(p[p > 0])).sum() / np.log(p.size)))
    assert summary["centre_fraction"] == pytest.approx(float(p[3:9, 3:9].sum()))
    assert summary["target_score"] == pytest.approx(float(outputs[0]["cam"]["target_score"]))


def test_gradient_flow_and_capture_summaries(resnet_run):
    model, images, outputs, debuggers = resnet_run
    for i in range(2):
        gradients = outputs[i]["gradients"]
        summary = debuggers["gradients"].summary(gradients)
        with torch.enable_grad():
            loss = F.cross_entropy(model({"image": images[i:i + 1]})["logits"], torch.tensor([i]))
            grad_w, grad_b = torch.autograd.grad(loss, [model.fc.weight, model.fc.bias])
        fc = math.sqrt(float(grad_w.double().pow(2).sum() + grad_b.double().pow(2).sum()))
        assert summary["norm.fc"] == pytest.approx(fc, rel=1e-4)
        assert summary["loss"] == pytest.approx(float(loss.detach()), rel=1e-5)
        assert summary["total_norm"] == pytest.approx(float(np.sqrt((gradients["grad_norms"] ** 2).sum())))
        assert summary["missing_layers"] == 0
        with torch.no_grad():
            pooled = model.layer2(model.layer1(model.stem(images[i:i + 1]))).mean(dim=(2, 3))
        assert debuggers["captured"].summary(outputs[i]["captured"]) == {
            "head.embedding.norm": pytest.approx(float(pooled.norm()), rel=1e-5)}


def test_nan_summary_names_the_first_bad_call_in_execution_order(resnet_run):
    model, images, outputs, debuggers = resnet_run
    order = []
    handles = [m.register_forward_hook(lambda mod, a, out, name=name: order.append(name))
               for name, m in model.named_modules()]
    with torch.no_grad():
        model({"image": images})
    for handle in handles:
        handle.remove()
    assert debuggers["nan"].summary(outputs[2]["nan"]) == {
        "has_nan": 1.0, "first_module_index": float(order.index("stem.0")),
        "bad_module_count": float(len(outputs[2]["nan"]["bad_modules"]))}
    clean = debuggers["nan"].summary(outputs[0]["nan"])
    assert clean["has_nan"] == 0.0 and math.isnan(clean["first_module_index"]) and clean["bad_module_count"] == 0


def test_attention_summary(tmp_path):
    torch.manual_seed(0)
    model = SeqFirstClassifier().eval()
    tokens = torch.randint(1, 20, (2, 5))
    tokens[1, 3:] = 0
    batches = [{"inputs": {"tokens": tokens}, "meta_info": {"idx": torch.arange(2)}}]
    _, outputs, columns = run_batches_with_columns(model, batches, tmp_path,
                                                   [entry("att", AttentionDebugger, layer_name="attn")], strict=True)
    for i in range(2):
        p = outputs[i]["att"]["attention"].astype(np.float64)  # (heads, real, real)
        entropy = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0)).sum(-1).mean(-1)
        summary = AttentionDebugger("attn").summary(outputs[i]["att"])
        for key, value in {"entropy_head0": entropy[0], "entropy_mean": entropy.mean(), "entropy_min": entropy.min(),
                           "entropy_max": entropy.max(), "max_attention": p.max()}.items():
            assert summary[key] == pytest.approx(value, rel=1e-5), key
            assert columns[f"att.{key}"][i] == pytest.approx(value, rel=1e-5), key  # the epoch table's, per batch


def test_summaries_of_split_tensors_equal_those_of_pages(resnet_run):
    """The epoch table summarises outputs right after the batch split (tensors), the viewer reads pages."""
    model, images, outputs, debuggers = resnet_run
    sequential = SequentialDebugger([entry(name, cls, **args) for name, (cls, args) in DEBUGGERS.items()],
                                    model=model)
    sequential.reset_buffer()
    sequential.enabled = True
    with torch.no_grad():
        batch = {"inputs": {"image": images}, "labels": {"class": torch.tensor([0, 1, 2])},
                 "meta_info": {"idx": torch.arange(3)}}
        batch["outputs"] = model(batch["inputs"])
        batch_outputs = sequential(batch, model)
    sequential.close()
    for name, debugger in debuggers.items():
        for i, output in enumerate(split_batch(batch_outputs[name], 3)):
            assert debugger.summary(output) == pytest.approx(debugger.summary(outputs[i][name]), nan_ok=True), name


def numpy_summaries(model, images, pages):
    """Every ready-made debugger's summary of each datapoint, computed here in NumPy (float64), datapoint by
    datapoint: from the layer outputs of a forward pass of this test's own, and from what the pages hold for the
    gradients, the cams and the NaN origins."""
    bn1, layer1, layer2 = (layer_output(model, name, images) for name in ("layer2.bn1", "layer1", "layer2"))
    order = []
    handles = [m.register_forward_hook(lambda mod, a, out, name=name: order.append(name))
               for name, m in model.named_modules()]
    with torch.no_grad():
        model({"image": images[:1]})
    for handle in handles:
        handle.remove()
    rows = []
    for i in range(len(images)):
        x, channels = bn1[i].reshape(-1), layer1[i].reshape(8, -1)
        top = pages[i]["features_top"]["channel_indices"]  # the 3 of highest mean (with a NaN map: torch's choice)
        if np.isfinite(channels).all():
            assert sorted(top) == sorted(np.argsort(-channels.mean(1))[:3])
        pooled = channels.mean(1)  # downsample_factor beyond the map: one cell per channel
        cam = pages[i]["cam"]["cam"].astype(np.float64)
        p = cam / cam.sum()
        ys, xs = ((np.arange(n) + 0.5) / n for n in cam.shape)
        centroid_x, centroid_y = (p.sum(0) * xs).sum(), (p.sum(1) * ys).sum()
        gradients = pages[i]["gradients"]
        norms, missing = gradients["grad_norms"].astype(np.float64), gradients["missing"]
        row = {"stats.mean": x.mean(), "stats.std": x.std(), "stats.min": x.min(), "stats.max": x.max(),
               "stats.l1_norm": np.abs(x).mean(), "stats.l2_norm": np.sqrt((x ** 2).sum()),
               "stats.sparsity": (x == 0).mean(), "stats.positive_ratio": (x > 0).mean(),
               "stats.saturation_low": (x <= -1).mean(), "stats.saturation_high": (x >= 1).mean(),
               "stats.nonfinite_ratio": (~np.isfinite(x)).mean()}
        for name, kept, indices in (("features", channels, np.arange(8)), ("features_top", channels[top], top)):
            row.update({f"{name}.mean": channels.mean(), f"{name}.std": channels.std(),
                        f"{name}.min": channels.min(), f"{name}.max": channels.max(),
                        f"{name}.energy": (kept ** 2).mean(),
                        f"{name}.dead_channel_fraction": (~kept.any(1)).mean(),
                        f"{name}.strongest_channel": indices[np.argmax(kept.mean(1))]})
        row.update({"output.pooled_norm": np.sqrt((pooled ** 2).sum()), "output.mean": pooled.mean(),
                    "output.std": pooled.std(),
                    "cam.target_score": pages[i]["cam"]["target_score"], "cam.raw_max": pages[i]["cam"]["raw_max"],
                    "cam.target_class": pages[i]["cam"]["target_class"],
                    "cam.centroid_x": centroid_x, "cam.centroid_y": centroid_y,
                    "cam.centre_fraction": p[3:9, 3:9].sum(),
                    "cam.spread": np.sqrt((p.sum(0) * (xs - centroid_x) ** 2).sum()
                                          + (p.sum(1) * (ys - centroid_y) ** 2).sum()),
                    "cam.entropy": -(p * np.log(p, where=p > 0, out=np.zeros_like(p))).sum() / np.log(p.size),
                    "gradients.loss": gradients["loss"], "gradients.total_norm": np.sqrt((norms ** 2).sum()),
                    "gradients.max_norm": norms[~missing].max(), "gradients.min_norm": norms[~missing].min(),
                    "gradients.missing_layers": missing.sum(), "gradients.zero_layers": (norms[~missing] == 0).sum(),
                    **{f"gradients.norm.{layer}": norm for layer, norm in zip(gradients["layers"], norms)},
                    "captured.head.embedding.norm": np.sqrt((layer2[i].mean(axis=(1, 2)) ** 2).sum())})
        first = pages[i]["nan"]["first_module"]
        row.update({"nan.has_nan": first is not None,
                    "nan.first_module_index": order.index(first) if first is not None else np.nan,
                    "nan.bad_module_count": len(pages[i]["nan"]["bad_modules"])})
        rows.append(row)
    return rows


def test_the_epoch_tables_batched_summaries_equal_each_datapoint_computed_alone_in_numpy(tmp_path):
    """Two batches (3 and 2), a NaN input in one datapoint: every column of every ready-made debugger, as computed
    per batch, equals the NumPy computation of each datapoint, and so does ``summary()`` of its page."""
    torch.manual_seed(0)
    model = TinyResNet().eval()
    images = torch.randn(5, 3, 12, 12)
    images[2, 0, 0, 0] = math.nan
    labels = torch.tensor([0, 1, 2, 3, 4])
    batches = [{"inputs": {"image": images[rows]}, "labels": {"class": labels[rows]},
                "meta_info": {"idx": torch.arange(5)[rows]}} for rows in (slice(0, 3), slice(3, 5))]
    debuggers = {**DEBUGGERS, "features_top": (FeatureMapDebugger, {"layer_name": "layer1", "max_channels": 3})}
    _, pages, columns = run_batches_with_columns(model, batches, tmp_path,
                                                 [entry(name, cls, **args) for name, (cls, args) in debuggers.items()])
    expected = numpy_summaries(model, images, pages)
    assert set(columns) == set(expected[0])
    built = {name: cls(**args) for name, (cls, args) in debuggers.items()}
    for i, row in enumerate(expected):
        for column, value in row.items():
            name, key = column.split(".", 1)
            alone = built[name].summary(pages[i][name])[key]
            np.testing.assert_allclose([columns[column][i], alone], [value, value], rtol=2e-5, atol=1e-6,
                                       err_msg=f"datapoint {i}: {column}")


def test_summaries_without_pages_equal_those_of_a_full_capture(tmp_path):
    """``full_outputs=False`` (``summaries_every_epoch``): the batched summaries are computed without copying or
    splitting the outputs, and equal a full capture's."""
    torch.manual_seed(0)
    model = TinyResNet().eval()
    images = torch.randn(5, 3, 12, 12)
    batch = {"inputs": {"image": images}, "labels": {"class": torch.arange(5)}, "meta_info": {"idx": torch.arange(5)}}
    columns = {}
    for full in (True, False):
        sequential = SequentialDebugger([entry(name, cls, **args) for name, (cls, args) in DEBUGGERS.items()],
                                        model=model, strict=True)
        sequential.reset_buffer(str(tmp_path / "debugger"), full_outputs=full)
        sequential.enabled = True
        with torch.no_grad():
            dp = dict(batch)
            dp["outputs"] = model(dp["inputs"])
            sequential(dp, model)
        sequential.save_all(str(tmp_path / "debugger"))
        sequential.close()
        columns[full] = {name: values for name, (_, values) in sequential.summaries.concatenated().items()}
    assert len(columns[True]) > 40 and columns[False].keys() == columns[True].keys()
    for name, values in columns[True].items():
        np.testing.assert_array_equal(columns[False][name], values, err_msg=name)
