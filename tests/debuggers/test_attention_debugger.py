"""AttentionDebugger on nn.MultiheadAttention and on the demo model's capture points."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.attention_debugger import AttentionDebugger, RowStatistics, background_executor
from debuggers.capture import capture_debug_state
from debuggers.pages.buffer_pool import BufferPool
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier
from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.compat.architectures import TokenEncoder
from tests.debuggers.library import (
    capture_epoch,
    entry,
    exit_code_in_forked_child,
    held_by_another_thread,
    leftover_hooks,
    make_batch,
    resident_blocks,
    run_batches,
    wait_until,
)

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


class MHAModel(nn.Module):
    """Tokens from image rows through nn.MultiheadAttention; keeps what the attention call returned."""

    def __init__(self, batch_first, need_weights=False, average=True, positional=False):
        super().__init__()
        torch.manual_seed(0)
        self.batch_first = batch_first
        self.call = (need_weights, average, positional)
        self.attn = nn.MultiheadAttention(12, 3, batch_first=batch_first)
        self.returned = None

    def tokens(self, image):
        x = image.reshape(image.shape[0], -1, 12)
        return x if self.batch_first else x.transpose(0, 1)

    def forward(self, inputs):
        x = self.tokens(inputs["image"])
        need, average, positional = self.call
        if positional:
            self.returned = self.attn(x, x, x, None, need, None, average)
        else:
            self.returned = self.attn(x, x, x, need_weights=need, average_attn_weights=average)
        out = self.returned[0] if self.batch_first else self.returned[0].transpose(0, 1)
        return {"logits": out.mean(1)[:, :6]}


def entropy(p):
    return -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0)).sum(-1).mean(-1)


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(5, 3, 4, 6)  # 6 tokens of 12 features


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_weights_match_a_direct_call(images, tmp_path, batch_first):
    model = MHAModel(batch_first).eval()
    outputs = capture_epoch(model, images, tmp_path, 2, [entry("att", AttentionDebugger, layer_name="attn")])
    x = model.tokens(images)
    with torch.no_grad():
        _, direct = model.attn(x, x, x, need_weights=True, average_attn_weights=False)
    direct = direct.numpy()
    assert direct.shape == (5, 3, 6, 6)
    for i in range(5):
        out = outputs[i]["att"]
        assert out["kind"] == "attention" and out["grid"] is None
        np.testing.assert_allclose(out["attention"], direct[i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["entropy_per_head"], entropy(direct[i].astype(np.float64)), rtol=1e-5)
        assert out["max_attention"] == pytest.approx(float(direct[i].max()), rel=1e-6)


@pytest.mark.parametrize("need_weights, average, positional", [
    (False, True, False), (True, True, False), (True, False, False), (False, True, True), (True, True, True)])
def test_the_caller_gets_what_it_asked_for(images, need_weights, average, positional):
    model = MHAModel(True, need_weights, average, positional).eval()
    with torch.no_grad():
        plain = model({"image": images})["logits"]
        expected_weights = model.returned[1]
    debugger = SequentialDebugger([entry("att", AttentionDebugger, layer_name="attn")], model=model)
    debugger.reset_buffer()
    debugger.enabled = True
    with torch.no_grad():
        hooked = model({"image": images})["logits"]
        got_weights = model.returned[1]
        assert debugger(make_batch(images, range(5)), model)["att"]["attention"].shape == (5, 3, 6, 6)
    debugger.close()
    torch.testing.assert_close(hooked, plain)
    if expected_weights is None:
        assert got_weights is None
    else:
        torch.testing.assert_close(got_weights, expected_weights)
    assert leftover_hooks(model) == 0


@pytest.mark.parametrize("busy_background", [False, True])
def test_capture_point_weights_match_an_independent_computation(tmp_path, busy_background):
    """busy_background: the row statistics' thread is stuck elsewhere; the debugger's call must not wait for it."""
    torch.manual_seed(0)
    model = AttentionClassifier(patch_size=4, dim=32, depth=2, num_heads=2).eval()
    images = torch.randn(3, 3, 16, 16)
    release = threading.Event()
    stuck = background_executor().submit(release.wait, 60) if busy_background else None
    try:
        outputs = capture_epoch(model, images, tmp_path, 2,
                                [entry("att", AttentionDebugger, layer_name="blocks.1.attn")])
        assert stuck is None or not stuck.done()
    finally:
        release.set()
    with torch.no_grad():
        embeddings = model.patch_embed(images)
        grid = tuple(embeddings.shape[2:])
        x = model.blocks[0](model.pos_embed(embeddings.flatten(2).transpose(1, 2), grid), grid)
        attn = model.blocks[1].attn
        attn.return_attention = True
        _, weights = attn(model.blocks[1].norm1(x), grid)
        attn.return_attention = False
    for i in range(3):
        out = outputs[i]["att"]
        assert out["grid"] == [4, 4]
        np.testing.assert_allclose(out["attention"], weights[i].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["entropy_per_head"], entropy(weights[i].double().numpy()), rtol=1e-5)


@pytest.mark.parametrize("direct_io", [True, False])
def test_attention_pages_go_to_disk_without_the_page_cache_unless_told_not_to(direct_folder, direct_io):
    """The weights' copies are buffers of their own, so an epoch's pages take them to the disk with O_DIRECT:
    what the writer copies into the page cache is the records, a few blocks (``direct_io=False``: all of it)."""
    torch.manual_seed(0)
    model = AttentionClassifier(patch_size=4, dim=32, depth=2, num_heads=2).eval()
    images = torch.randn(128, 3, 32, 32)  # 64 tokens: 32 KiB of weights per datapoint, 2 MiB per batch of 64
    debugger = SequentialDebugger([entry("att", AttentionDebugger, layer_name="blocks.1.attn")], model=model,
                                  direct_io=direct_io)
    debugger.reset_buffer(str(direct_folder / "debugger"))
    debugger.enabled = True
    with torch.no_grad():
        for start in (0, 64):
            batch = make_batch(images, range(start, start + 64))
            batch["outputs"] = model(batch["inputs"])
            debugger(batch, model)
    debugger.save_all(str(direct_folder / "debugger"))
    debugger.close()
    [page] = (direct_folder / "debugger").glob("page_*.pkl")
    cached = resident_blocks(str(page))  # before reading it back
    assert cached.mean() > 0.9 if not direct_io else cached.mean() < 0.1, (cached.sum(), len(cached))
    outputs = load_debug_outputs(str(direct_folder))
    returned = []
    with torch.no_grad():
        attn = model.blocks[1].attn
        attn.return_attention = True
        handle = attn.register_forward_hook(lambda module, args, output: returned.append(output[1]))
        model({"image": images})
        handle.remove()
        attn.return_attention = False
    for i in range(128):
        np.testing.assert_allclose(outputs[i]["att"]["attention"], returned[0][i].numpy(), rtol=1e-5, atol=1e-6)


def test_model_output_is_unchanged_while_attached():
    torch.manual_seed(0)
    model = AttentionClassifier(dim=32, num_heads=2).eval()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        plain = model({"image": images})["logits"]
        debugger = SequentialDebugger([entry("att", AttentionDebugger, layer_name="blocks.0.attn")], model=model)
        debugger.reset_buffer()
        debugger.enabled = True
        hooked = model({"image": images})["logits"]
        debugger.close()
    torch.testing.assert_close(hooked, plain)
    assert model.blocks[0].attn.return_attention is False
    assert leftover_hooks(model) == 0


def test_a_layer_offering_no_weights_is_a_clear_error(tmp_path):
    torch.manual_seed(0)
    model = AttentionClassifier(dim=32, num_heads=2).eval()
    outputs = capture_epoch(model, torch.randn(2, 3, 16, 16), tmp_path, 2,
                            [entry("att", AttentionDebugger, layer_name="blocks.0.mlp")])
    assert outputs[0]["att"]["kind"] == "error"
    assert "layer 'blocks.0.mlp' (Sequential) ran but offered no 'attention_weights'" in outputs[0]["att"]["message"]


def padded_batch(sequences, idx, length=None):
    """A batch of token sequences right-padded with 0 (to ``length``, or the longest), and its attention mask."""
    length = length or max(len(s) for s in sequences)
    tokens = torch.tensor([s + [0] * (length - len(s)) for s in sequences])
    return {"inputs": {"tokens": tokens, "attention_mask": (tokens != 0).long()},
            "meta_info": {"idx": torch.tensor(idx)}}


SEQUENCES = [[3, 5, 7, 9], [4, 2, 6, 8, 1, 11, 12], [13, 14], [5, 5, 6, 7, 8, 9, 10]]


@pytest.mark.parametrize("nested, batch_first", [(True, True), (False, True), (False, False)])
def test_padding_is_cropped_and_batched_equals_alone(tmp_path, nested, batch_first):
    torch.manual_seed(0)
    model = TokenEncoder(nested=nested, batch_first=batch_first).eval()
    debuggers = [entry("att", AttentionDebugger, layer_name="encoder.layers.0.self_attn")]
    batched = run_batches(model, [padded_batch(SEQUENCES, [0, 1, 2, 3])], tmp_path / "batched", debuggers)[1]
    alone = run_batches(model, [padded_batch([s], [i]) for i, s in enumerate(SEQUENCES)], tmp_path / "alone",
                        debuggers)[1]
    for i, sequence in enumerate(SEQUENCES):
        with torch.no_grad():  # independent: the layer called on the datapoint alone, without padding
            x = model.embed(torch.tensor([sequence]))
            x = x if batch_first else x.transpose(0, 1)
            _, direct = model.encoder.layers[0].self_attn(x, x, x, need_weights=True, average_attn_weights=False)
        direct = direct[0].numpy()
        for out in (batched[i]["att"], alone[i]["att"]):
            assert out["attention"].shape == (2, len(sequence), len(sequence))
            np.testing.assert_allclose(out["attention"], direct, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(out["entropy_per_head"], entropy(direct.astype(np.float64)), rtol=1e-5)
            assert out["max_attention"] == pytest.approx(float(direct.max()), rel=1e-5)


def test_a_batch_padded_alike_is_cropped_like_each_datapoint_alone(tmp_path):
    """Datapoints with the same real tokens are cropped for the whole batch at once: same as alone."""
    torch.manual_seed(0)
    model = TokenEncoder(nested=False, batch_first=True).eval()
    debuggers = [entry("att", AttentionDebugger, layer_name="encoder.layers.0.self_attn")]
    sequences = [[3, 5, 7], [4, 2, 6], [9, 9, 1]]
    batched = run_batches(model, [padded_batch(sequences, [0, 1, 2], length=6)], tmp_path / "batched", debuggers)[1]
    alone = run_batches(model, [padded_batch([s], [i]) for i, s in enumerate(sequences)], tmp_path / "alone",
                        debuggers)[1]
    for i in range(len(sequences)):
        assert batched[i]["att"]["attention"].shape == (2, 3, 3)
        for key in ("attention", "entropy_per_head", "max_attention"):
            np.testing.assert_allclose(batched[i]["att"][key], alone[i]["att"][key], rtol=1e-5, atol=1e-6)


class FloatMaskedAttention(nn.Module):
    """Token embeddings through nn.MultiheadAttention whose padding is an additive float key_padding_mask."""

    def __init__(self, fill: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fill = fill
        self.embed = nn.Embedding(20, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, inputs):
        tokens = inputs["tokens"]
        x = self.embed(tokens)
        mask = torch.zeros(tokens.shape).masked_fill(tokens == 0, self.fill)
        return {"logits": self.attn(x, x, x, key_padding_mask=mask)[0].mean(1)[:, :3]}


@pytest.mark.parametrize("fill", [float("-inf"), -1e9, -1e4])
def test_an_additive_float_padding_mask_is_cropped_and_batched_equals_alone(tmp_path, fill):
    """-1e9 and -1e4 mask a key as -inf does (its weight is 0): the same crop, so batched equals alone."""
    model = FloatMaskedAttention(fill).eval()
    debuggers = [entry("att", AttentionDebugger, layer_name="attn")]
    batched = run_batches(model, [padded_batch(SEQUENCES, [0, 1, 2, 3])], tmp_path / "batched", debuggers)[1]
    alone = run_batches(model, [padded_batch([s], [i]) for i, s in enumerate(SEQUENCES)], tmp_path / "alone",
                        debuggers)[1]
    for i, sequence in enumerate(SEQUENCES):
        with torch.no_grad():  # independent: the layer on the datapoint alone, without padding or mask
            x = model.embed(torch.tensor([sequence]))
            direct = model.attn(x, x, x, need_weights=True, average_attn_weights=False)[1][0].numpy()
        for out in (batched[i]["att"], alone[i]["att"]):
            assert out["attention"].shape == (2, len(sequence), len(sequence))
            np.testing.assert_allclose(out["attention"], direct, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(out["entropy_per_head"], entropy(direct.astype(np.float64)), rtol=1e-5)


class ReturnsScoresAndWeights(nn.Module):
    """A module returning (output, scores before the softmax[, weights]): only softmaxed weights are read."""

    def __init__(self, with_weights: bool) -> None:
        super().__init__()
        self.with_weights = with_weights

    def forward(self, x):
        scores = torch.einsum("bqd,bkd->bqk", x, x)[:, None] / 4
        weights = scores.softmax(-1)
        return (weights @ x[:, None]).mean(1), scores, *([weights] if self.with_weights else [])


@pytest.mark.parametrize("with_weights", [True, False])
def test_only_softmaxed_weights_are_read_from_a_layers_output(tmp_path, with_weights):
    """As T5's attention returns (output, position_bias, weights): the last 4-D tensor is read, and a tensor
    that is not softmaxed weights is refused by name, never stored as attention."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = ReturnsScoresAndWeights(with_weights)

        def forward(self, inputs):
            return {"logits": self.layer(inputs["image"].reshape(len(inputs["image"]), -1, 16))[0].mean(1)[:, :6]}

    images = torch.randn(4, 3, 16, 16)
    out = capture_epoch(Model().eval(), images, tmp_path, 4, [entry("att", AttentionDebugger, layer_name="layer")])
    x = images.reshape(4, -1, 16)
    expected = (torch.einsum("bqd,bkd->bqk", x, x) / 4).softmax(-1)
    for i in range(4):
        if with_weights:
            np.testing.assert_allclose(out[i]["att"]["attention"][0], expected[i].numpy(), rtol=1e-5, atol=1e-7)
        else:
            assert out[i]["att"]["kind"] == "error"
            assert "returned a 4-D tensor as element 1 of its output, but it is not attention weights" \
                in out[i]["att"]["message"]


@pytest.mark.parametrize("tokens", [4, 128])  # 128: batches of weights large enough to reuse pooled buffers
def test_offered_weights_are_copied_when_offered(tmp_path, tokens):
    class ChangesItsWeights(nn.Module):
        def forward(self, inputs):
            x = inputs["image"].flatten(1)[:, :tokens]
            weights = torch.softmax(x[:, None, :, None] * x[:, None, None, :], dim=-1)  # (B, 1, L, L)
            capture_debug_state("mix", "attention_weights", weights)
            weights.zero_()
            return {"logits": x}

    model = nn.Sequential()
    model.add_module("mix", ChangesItsWeights())
    torch.manual_seed(0)
    images = torch.randn(10, 3, 8, 8)
    outputs = capture_epoch(model, images, tmp_path, 4, [entry("att", AttentionDebugger, layer_name="mix")])
    x = images.flatten(1)[:, :tokens]
    expected = torch.softmax(x[:, :, None] * x[:, None, :], dim=-1)
    for i in range(len(images)):
        np.testing.assert_allclose(outputs[i]["att"]["attention"][0], expected[i].numpy(), rtol=1e-6)
        np.testing.assert_allclose(outputs[i]["att"]["entropy_per_head"], entropy(expected[i, None].double().numpy()),
                                   rtol=1e-5)


def test_summary_statistics_match_numpy_and_propagate_nan():
    debugger = AttentionDebugger("blocks.0.attn")
    entropy = np.array([0.5, 0.125, 0.25], np.float32)
    summary = debugger.summary({"entropy_per_head": entropy, "max_attention": np.float32(0.75)})
    assert summary == {"entropy_mean": pytest.approx(float(entropy.mean())), "entropy_min": 0.125,
                       "entropy_max": 0.5, "max_attention": 0.75, "entropy_head0": 0.5, "entropy_head1": 0.125,
                       "entropy_head2": 0.25}
    summary = debugger.summary({"entropy_per_head": np.array([0.5, np.nan, 0.25]), "max_attention": 0.75})
    assert all(np.isnan(summary[key]) for key in ("entropy_mean", "entropy_min", "entropy_max"))


def test_a_batch_of_summaries_equals_each_datapoint_summarised_alone():
    debugger = AttentionDebugger("blocks.0.attn")
    rng = np.random.default_rng(0)
    outputs = [{"entropy_per_head": rng.random(10).astype(np.float32), "max_attention": float(rng.random())}
               for _ in range(5)]
    outputs[2]["entropy_per_head"][3] = np.nan
    batch = {"entropy_per_head": torch.from_numpy(np.stack([output["entropy_per_head"] for output in outputs])),
             "max_attention": torch.tensor([output["max_attention"] for output in outputs])}  # as __call__ gives it
    columns = debugger.summary_columns(batch)
    assert set(columns) == set(debugger.summary(outputs[0])) and len(columns) == 4 + 8
    for i, output in enumerate(outputs):
        alone = debugger.summary(output)
        entropy = output["entropy_per_head"].astype(np.float64)
        expected = {"entropy_mean": entropy.mean(), "entropy_min": entropy.min(), "entropy_max": entropy.max(),
                    "max_attention": output["max_attention"], **{f"entropy_head{h}": entropy[h] for h in range(8)}}
        for key, value in expected.items():  # independent of summary(), which summary_columns makes
            np.testing.assert_allclose([columns[key][i], alone[key]], [value, value], err_msg=key)


@pytest.fixture
def one_torch_thread():
    """The forward pass on one intra-op thread: the row statistics go to the background thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def row_statistics_in_float64(weights):
    """Entropy (0 log 0 = 0) and maximum of each row, computed independently in float64."""
    p = weights.double().numpy()
    return -(p * np.log(np.where(p > 0, p, 1))).sum(-1), p.max(-1)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(3, 2, 5, 7), (4, 6, 9), (2, 3, 300, 1000)])  # single-head; many chunks
def test_row_statistics_match_float64_with_zeros_and_nan(threads, shape):
    """One thread: on the background thread with NumPy's log; several: in the caller with torch's."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        weights = torch.randn(shape).mul(4).softmax(-1)
        weights[0, ..., 1:3, :] = 0  # an all-zero row and a one-hot row (0 log 0 = 0)
        weights[0, ..., 2, 0] = 1
        weights[-1, ..., -1, -1] = float("nan")
        probs, entropy, row_max = RowStatistics(weights, BufferPool()).result()
    finally:
        torch.set_num_threads(before)
    expected_entropy, expected_max = row_statistics_in_float64(weights)
    heads_first = (shape[0], 1, *shape[1:-1]) if len(shape) == 3 else shape[:-1]
    assert probs.shape == (*heads_first, shape[-1]) and entropy.shape == row_max.shape == heads_first
    entropy = entropy.reshape(shape[:-1]).numpy()
    np.testing.assert_allclose(entropy, expected_entropy, rtol=1e-5, atol=1e-6)  # NaN where it expects NaN
    np.testing.assert_allclose(row_max.reshape(shape[:-1]).numpy(), expected_max)
    assert np.isnan(entropy[-1, ..., -1]).all() and (entropy[0, ..., 1:3] == 0).all()


def test_a_child_forked_while_the_thread_computes_a_capture_computes_it_itself(one_torch_thread):
    """The child's copy of the background thread never runs: waiting for it would hang the child forever."""
    pool = BufferPool()
    torch.manual_seed(0)
    weights = torch.randn(8, 4, 32, 32).softmax(-1)
    with held_by_another_thread(pool._lock):  # the statistics' scratch comes from the pool: the job waits, running
        rows = RowStatistics(weights, pool)
        wait_until(lambda: rows._future.running())

        def child_gets_the_statistics():
            expected_entropy, expected_max = row_statistics_in_float64(weights)
            _, entropy, row_max = rows.result()
            _, again, _ = RowStatistics(weights, pool).result()  # the child's own background thread
            return np.allclose(entropy.numpy(), expected_entropy, rtol=1e-5) and \
                np.allclose(row_max.numpy(), expected_max) and torch.equal(again, entropy)

        code = exit_code_in_forked_child(child_gets_the_statistics, timeout_s=20)
    assert code == 0, f"the forked child hung or failed (exit code {code})"
    np.testing.assert_allclose(rows.result()[1].numpy(), row_statistics_in_float64(weights)[0], rtol=1e-5)


class CalledSixTimes(nn.Module):
    """One attention layer run six times in a forward pass (weights shared across depth)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, inputs):
        x = inputs["image"].reshape(inputs["image"].shape[0], -1, 16)
        for _ in range(6):
            x = x + self.attn(x, x, x, need_weights=False)[0]
        return {"logits": x.mean(1)[:, :6], "last_input": x}


def test_a_layer_run_again_drops_the_replaced_captures_work_and_copy(one_torch_thread, tmp_path):
    """Only the last call's capture is kept: the earlier calls' statistics are not computed (the thread is
    busy here, so none has started) and their copies go back to the pool at once."""
    model = CalledSixTimes().eval()
    images = torch.randn(8, 3, 16, 64)  # 192 tokens: (8, 2, 192, 192) weights, pooled
    debugger = SequentialDebugger([entry("att", AttentionDebugger, layer_name="attn")], model=model)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    attention, addresses = debugger.debuggers["att"], []
    seen = model.attn.register_forward_hook(lambda *_: addresses.append(attention.last_capture.weights.data_ptr()))
    release = threading.Event()
    stuck = background_executor().submit(release.wait, 60)
    try:
        with torch.no_grad():
            batch = make_batch(images, range(8))
            batch["outputs"] = model(batch["inputs"])
            recorded = debugger(batch, model)["att"]
        assert not stuck.done()
    finally:
        release.set()
    seen.remove()
    debugger.close()
    assert len(addresses) == 6 and len(set(addresses)) <= 2, addresses
    x = images.reshape(8, -1, 16)
    with torch.no_grad():
        for _ in range(5):
            x = x + model.attn(x, x, x, need_weights=False)[0]
        _, last = model.attn(x, x, x, need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(recorded["attention"].numpy(), last.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(recorded["entropy_per_head"].numpy(),
                               row_statistics_in_float64(last)[0].mean(-1), rtol=1e-5)


def test_the_buffers_are_released_when_capture_stops(tmp_path):
    torch.manual_seed(0)
    model = AttentionClassifier(patch_size=2, dim=32, num_heads=4).eval()  # 64 tokens: pooled copies
    debugger = SequentialDebugger([entry("att", AttentionDebugger, layer_name="blocks.1.attn")], model=model)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    with torch.no_grad():
        for start in (0, 8):
            batch = make_batch(torch.randn(16, 3, 16, 16), range(start, start + 8))
            batch["outputs"] = model(batch["inputs"])
            debugger(batch, model)
    debugger.save_all()
    pool = debugger.debuggers["att"]._pool
    assert pool.kept_bytes > 0
    debugger.enabled = False
    assert pool.kept_bytes == 0 and pool.free_buffers == 0
    debugger.close()


def test_several_intra_op_threads_start_no_thread_team_of_their_own(tmp_path):
    """With torch.set_num_threads(4) the statistics share the forward pass's OpenMP team: captures add no
    native thread to those of plain forward passes (a background thread would bring a team of its own). In a
    new process, so that no background thread exists yet."""
    script = f"""
import os, threading, torch
from debuggers.attention_debugger import AttentionDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier
def native_threads():  # OpenMP's workers: threads that Python did not start
    return len(os.listdir('/proc/self/task')) - threading.active_count()
torch.set_num_threads(4)
model = AttentionClassifier().eval()
debugger = SequentialDebugger([{{'name': 'att', 'debugger_config': {{'class': AttentionDebugger,
                               'args': {{'layer_name': 'blocks.1.attn'}}}}}}], model=model)
debugger.reset_buffer({str(tmp_path / "debugger")!r})
images = torch.randn(16, 3, 32, 32)
with torch.no_grad():
    model({{'image': images}})
    before = native_threads()
    debugger.enabled = True
    for start in (0, 16):
        dp = {{'inputs': {{'image': images}}, 'meta_info': {{'idx': torch.arange(start, start + 16)}}}}
        dp['outputs'] = model(dp['inputs'])
        debugger(dp, model)
debugger.save_all()
print(before, native_threads())
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=REPOSITORY_ROOT)
    assert result.returncode == 0, result.stderr
    before, after = map(int, result.stdout.split())
    assert before >= 3 and after == before, result.stdout
