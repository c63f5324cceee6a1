"""A user's model as it is (runners/plain_model.py): tensors in, a tensor, a tuple or a Hugging Face ModelOutput out,
trained by the examples' configs with only their ``model`` entry changed. Each run is checked against the same
network under Lantern's dict contract (the same weights from the same seed: the same scores and debug outputs), or
against a forward pass by hand."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, BertForSequenceClassification, ViTConfig, ViTForImageClassification

from data.datasets import SyntheticShapesDataset, collate_datapoints
from data.datasets.planted_sequences import PlantedSequencesDataset
from data.datasets.planted_signals import PlantedSignalsDataset
from debuggers.attention_debugger import AttentionDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import SignalCNN, SmallCNN
from run_dir import RunDir
from runners.checkpoints import load_checkpoint_file
from runners.config_file import load_config
from runners.eval_viewer.backend.initialization import load_debug_outputs
from runners.plain_model import ModelCallSettings, PlainModel, as_lantern_model, takes_inputs_dict
from runners.trainers import BaseTrainer
from tests.runs import REPO_ROOT, one_thread, run_main
from utils.atomic_files import read_json
from utils.builders import build_from_config
from utils.errors import ConfigError, ModelContractError


class PlainCNN(nn.Module):
    """The default example's network as a user writes it: an image tensor in, the logits out, the same layer names
    (``backbone.layer4``, ``head.fc``) and, built from the same seed, the same weights."""

    def __init__(self, num_classes: int = 6, in_channels: int = 3, widths=(16, 32, 64, 64)) -> None:
        super().__init__()
        reference = SmallCNN(num_classes=num_classes, in_channels=in_channels, widths=widths)
        self.backbone, self.head = reference.backbone, reference.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def example(name: str, work_dir, **changes) -> dict:
    config = load_config(os.path.join(REPO_ROOT, "configs", "examples", name))
    return {**config, "work_dir": str(work_dir), **changes}


def small_cnn_example(work_dir, model: dict) -> dict:
    """configs/examples/cnn_trainer.py, small: 2 epochs of 96 images, 40 validated in batches of 16."""
    config = example("cnn_trainer.py", work_dir, epochs=2, model=model)
    config["train_dataset"] = {**config["train_dataset"], "args": {"num_datapoints": 96, "split": "train"}}
    config["val_dataset"] = {**config["val_dataset"], "args": {"num_datapoints": 40, "split": "val"}}
    config["val_dataloader"] = {**config["val_dataloader"], "args": {**config["val_dataloader"]["args"],
                                                                     "batch_size": 16}}
    config["scheduler"] = {**config["scheduler"], "args": {"T_max": 2}}
    return config


def train(config: dict) -> RunDir:
    with one_thread():
        BaseTrainer(config).run()
    return RunDir(config["work_dir"])


@pytest.fixture(scope="module")
def cnn_runs(tmp_path_factory):
    """The default example trained with its own SmallCNN and with PlainCNN in its place."""
    folder = tmp_path_factory.mktemp("plain")
    return {kind: train(small_cnn_example(folder / kind, model)) for kind, model in (
        ("dict", {"class": SmallCNN, "args": {"num_classes": 6}}),
        ("plain", {"class": PlainCNN, "args": {"num_classes": 6}}))}


@pytest.mark.timeout(400)
def test_the_default_example_with_a_plain_model_gives_every_debugger_every_datapoint(cnn_runs):
    plain, reference = cnn_runs["plain"], cnn_runs["dict"]
    names = ["layer4_features", "layer3_stats", "gradcam"]
    for epoch in (1,):  # checkpoint_method 2 over 2 epochs: epoch 1 is debugged
        outputs = load_debug_outputs(plain.epoch(epoch).path)
        expected = load_debug_outputs(reference.epoch(epoch).path)
        assert sorted(outputs) == list(range(40))
        for idx in range(40):
            assert list(outputs[idx]) == names
            for name in names:
                assert outputs[idx][name] is not None and outputs[idx][name].get("kind") != "error", (idx, name)
            np.testing.assert_allclose(outputs[idx]["gradcam"]["cam"], expected[idx]["gradcam"]["cam"], atol=1e-5)
            np.testing.assert_allclose(outputs[idx]["layer4_features"]["feature_map"],
                                       expected[idx]["layer4_features"]["feature_map"], atol=1e-5)
    scores = read_json(plain.epoch(1).scores)
    assert scores["aggregated"] == pytest.approx(read_json(reference.epoch(1).scores)["aggregated"])


def test_the_plain_models_checkpoint_loads_into_the_plain_model_outside_lantern(cnn_runs):
    state = load_checkpoint_file(cnn_runs["plain"].epoch(1).checkpoint)["model_state_dict"]
    model = PlainCNN()
    model.load_state_dict(state)  # its own keys: backbone.layer1.conv.weight, ..., no prefix
    model.eval()
    batch = collate_datapoints([SyntheticShapesDataset(num_datapoints=40, split="val")[i] for i in range(16)])
    with torch.no_grad():
        accuracy = (model(batch["inputs"]["image"]).argmax(1) == batch["labels"]["class"]).float().mean()
    scores = read_json(cnn_runs["plain"].epoch(1).scores)
    first = scores["per_datapoint"]["accuracy"][:16]
    assert float(accuracy) == pytest.approx(np.mean(first))


def test_the_run_log_says_how_a_plain_model_is_called(cnn_runs):
    log = open(os.path.join(cnn_runs["plain"].path, "train.log")).read()
    assert "config['model'] (PlainCNN) takes tensors: given inputs['image'], a tensor output named 'logits'" in log
    assert "takes tensors" not in open(os.path.join(cnn_runs["dict"].path, "train.log")).read()


def tiny_vit(num_labels: int = 6) -> ViTForImageClassification:
    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       image_size=16, patch_size=4, num_labels=num_labels)
    return ViTForImageClassification(config)


@pytest.mark.timeout(300)
def test_a_hugging_face_vit_trains_through_its_model_output(tmp_path):
    config = small_cnn_example(tmp_path / "vit", {"class": tiny_vit, "args": {}})
    for key in ("train_dataset", "val_dataset"):
        config[key] = {**config[key], "args": {**config[key]["args"], "resolution": 16}}
    config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
        {"name": "attention", "debugger_config": {"class": AttentionDebugger, "args": {
            "layer_name": "vit.layers.1.attention"}}}]}}
    run = train(config)
    outputs = load_debug_outputs(run.epoch(1).path)
    assert sorted(outputs) == list(range(40))
    # independent: the trained model's own attentions, asked of Hugging Face directly
    model = tiny_vit()
    model.load_state_dict(load_checkpoint_file(run.epoch(1).checkpoint)["model_state_dict"])
    model.eval().set_attn_implementation("eager")
    batch = collate_datapoints([SyntheticShapesDataset(num_datapoints=40, split="val", resolution=16)[i]
                                for i in range(4)])
    with torch.no_grad():
        attentions = model(batch["inputs"]["image"], output_attentions=True).attentions[1]
    for row in range(4):
        np.testing.assert_allclose(outputs[row]["attention"]["attention"], attentions[row].numpy(), atol=1e-5)


class TokenClassifier(nn.Module):
    """A sequence model as research code writes it: tokens and their mask by keyword, a tuple out."""

    def __init__(self, vocab_size: int = 64, dim: int = 16, num_classes: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.encoder = nn.TransformerEncoderLayer(dim, 2, 32, batch_first=True)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.encoder(self.embed(tokens), src_key_padding_mask=attention_mask == 0)
        real = attention_mask.unsqueeze(-1).float()
        pooled = (hidden * real).sum(1) / real.sum(1)
        return self.head(pooled), pooled


def test_the_inputs_named_like_forwards_parameters_go_by_keyword_and_a_tuple_is_named():
    model = as_lantern_model(TokenClassifier(), ModelCallSettings(model_outputs=["logits", "embedding"]),
                             {"tokens": torch.zeros(1, 5, dtype=torch.long), "attention_mask": torch.ones(1, 5)})
    assert isinstance(model, PlainModel)
    inputs = {"tokens": torch.randint(1, 64, (3, 5)), "attention_mask": torch.tensor([[1] * 5, [1] * 3 + [0] * 2,
                                                                                      [1] * 5])}
    model.eval()
    outputs = model(inputs)
    with torch.no_grad():
        logits, pooled = model.plain(inputs["tokens"], attention_mask=inputs["attention_mask"])
    assert list(outputs) == ["logits", "embedding"]
    torch.testing.assert_close(outputs["logits"], logits)
    torch.testing.assert_close(outputs["embedding"], pooled)
    default = PlainModel(TokenClassifier(), ModelCallSettings())
    assert list(default.named_outputs((logits, pooled))) == ["output_0", "output_1"]


def test_a_bert_given_its_arguments_by_a_mapping():
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=3)
    torch.manual_seed(0)
    bert = BertForSequenceClassification(config).eval()
    settings = ModelCallSettings.from_config({"model_inputs": {"input_ids": "tokens", "attention_mask": "mask"}})
    model = as_lantern_model(bert, settings)
    tokens, mask = torch.randint(1, 40, (2, 6)), torch.ones(2, 6, dtype=torch.long)
    outputs = model({"tokens": tokens, "mask": mask})
    assert list(outputs) == ["logits"]  # the ModelOutput's fields that are not None
    torch.testing.assert_close(outputs["logits"], bert(input_ids=tokens, attention_mask=mask).logits)


@pytest.mark.parametrize(("forward", "dict_contract"), [
    ("def forward(self, inputs): ...", True),
    ("def forward(self, inputs: dict) -> dict: ...", True),
    ("def forward(self, batch: 'dict[str, torch.Tensor]'): ...", True),
    ("def forward(self, batch: Mapping): ...", True),
    ("def forward(self, inputs: torch.Tensor): ...", False),
    ("def forward(self, x): ...", False),
    ("def forward(self, pixel_values=None, labels=None): ...", False),
])
def test_which_models_take_the_inputs_dict(forward, dict_contract):
    namespace = {"torch": torch, "Mapping": __import__("collections.abc").abc.Mapping}
    exec(f"class Model(torch.nn.Module):\n    {forward}", namespace)
    assert takes_inputs_dict(namespace["Model"]()) is dict_contract


@pytest.mark.parametrize(("model", "settings", "inputs", "message"), [
    (nn.Linear(4, 2), {}, {"a": 1, "b": 2}, "several inputs ['a', 'b'], none named like its parameters: set "
                                            "config['model_inputs']"),
    (nn.Bilinear(4, 4, 2), {}, {"image": 1}, "cannot be called with inputs['image'] (missing a required argument: "
                                             "'input2'); the datapoint's inputs are ['image']: set "
                                             "config['model_inputs']"),
    (nn.Linear(4, 2), {"model_inputs": "img"}, {"image": 1}, "config['model_inputs'] names the input(s) ['img'], "
                                                             "but the datapoint's inputs are ['image']"),
])
def test_a_call_that_cannot_work_is_refused_at_once_naming_what_to_set(model, settings, inputs, message):
    with pytest.raises(ModelContractError) as error:
        as_lantern_model(model, ModelCallSettings.from_config(settings), inputs)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_outputs_that_cannot_be_named_are_refused_naming_what_to_set():
    two_names = PlainModel(nn.Identity(), ModelCallSettings(model_outputs=["logits", "extra"]))
    with pytest.raises(ModelContractError, match=r"returned 1 output\(s\) but config\['model_outputs'\] names 2"):
        two_names({"x": torch.zeros(2, 3)})
    named = PlainModel(nn.Identity(), ModelCallSettings(model_outputs="scores"))
    with pytest.raises(ModelContractError, match=r"returns named outputs already \(\['a'\]\); remove"):
        named.named_outputs({"a": 1})
    with pytest.raises(ModelContractError, match="returned a str"):
        PlainModel(nn.Identity(), ModelCallSettings()).named_outputs("text")
    with pytest.raises(ConfigError, match=r"config\['model_outputs'\] must be a name or a list of names"):
        ModelCallSettings.from_config({"model_outputs": 3})


def test_the_adapter_is_the_plain_models_tree_its_mode_and_its_device():
    plain = PlainCNN(widths=(4, 4, 4, 4))
    model = PlainModel(plain, ModelCallSettings())
    assert [name for name, _ in model.named_modules()][1:] == [name for name, _ in plain.named_modules()][1:]
    assert list(model.state_dict()) == list(plain.state_dict())
    assert [id(p) for p in model.parameters()] == [id(p) for p in plain.parameters()]
    model.eval()
    assert not plain.training and not model.training and not plain.backbone.training
    model.train()
    assert plain.training and model.training
    model.to(torch.float64)
    assert plain.head.fc.weight.dtype == torch.float64
    twin = copy.deepcopy(model)
    assert twin.plain is not plain and twin._modules is twin.plain._modules
    assert repr(model).startswith("PlainCNN(")
    assert type(as_lantern_model(plain, ModelCallSettings())).__name__ == "PlainCNN"  # as errors name it


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("config_name", "model", "debugged"), [
    ("digits_trainer.py", {"class": PlainCNN, "args": {"num_classes": 10, "in_channels": 1,
                                                       "widths": (8, 16, 16, 16)}},
     ["layer4_output", "layer3_stats", "gradcam"]),
])
def test_another_example_with_its_model_as_a_plain_module(tmp_path, config_name, model, debugged):
    config = example(config_name, tmp_path / "run", epochs=1, model=model)
    config["scheduler"] = {**config["scheduler"], "args": {"T_max": 1}}
    run = train(config)
    outputs = load_debug_outputs(run.epoch(0).path)
    assert len(outputs) == len(build_from_config(config["val_dataset"]))
    assert all(list(outputs[idx]) == debugged for idx in outputs)
    assert read_json(run.epoch(0).scores)["aggregated"]["accuracy"] > 0.5


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_signals_model_given_as_a_plain_module_with_a_tuple_output_through_main(tmp_path):
    """The signals benchmark's SignalCNN taking ``signal`` by keyword and returning a tuple named by the config;
    without ``model_outputs`` the criterion's error names the key to set, in one line."""
    body = """
import torch
from torch.utils.data import DataLoader

from criteria import CrossEntropyCriterion
from data.datasets import collate_datapoints
from data.datasets.planted_sequences import PlantedSequencesDataset
from data.datasets.planted_signals import PlantedSignalsDataset
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from metrics import ClassificationMetric
from runners.trainers import BaseTrainer
from models import SignalCNN


class PlainSignalCNN(SignalCNN):
    # the recording by keyword (the datapoint's input is named 'signal'); (logits, pooled features) out

    def forward(self, signal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.backbone(signal)
        return self.head(features), features.mean(dim=-1)


config = {
    "runner": BaseTrainer, "work_dir": WORK_DIR, "epochs": 1,
    "train_dataset": {"class": PlantedSignalsDataset, "args": {"num_datapoints": 64, "split": "train"}},
    "train_dataloader": {"class": DataLoader, "args": {"batch_size": 16, "collate_fn": collate_datapoints}},
    "val_dataset": {"class": PlantedSignalsDataset, "args": {"num_datapoints": 24, "split": "val"}},
    "val_dataloader": {"class": DataLoader, "args": {"batch_size": 8, "collate_fn": collate_datapoints}},
    "model": {"class": PlainSignalCNN, "args": {}},
    "criterion": {"class": CrossEntropyCriterion, "args": {}},
    "metric": {"class": ClassificationMetric, "args": {}},
    "optimizer": {"class": torch.optim.Adam, "args": {"lr": 1e-3}},
    "debugger": {"class": SequentialDebugger, "args": {"debuggers_config": [
        {"name": "stage2",
         "debugger_config": {"class": LayerOutputDebugger, "args": {"layer_name": "backbone.stage2"}}},
    ]}},
}
"""
    unnamed = tmp_path / "unnamed.py"
    unnamed.write_text(body.replace("WORK_DIR", repr(str(tmp_path / "unnamed"))))
    result = run_main(unnamed, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert result.returncode == 2, result.stderr
    assert ("CrossEntropyCriterion reads the model's outputs['logits'], but they have the keys ['output_0', "
            "'output_1']") in result.stderr and "config['model_outputs']" in result.stderr
    named = tmp_path / "named.py"
    named.write_text(body.replace("WORK_DIR", repr(str(tmp_path / "named")))
                     + 'config["model_outputs"] = ["logits", "embedding"]\n')
    result = run_main(named, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert result.returncode == 0, result.stderr
    outputs = load_debug_outputs(str(tmp_path / "named" / "epoch_0"))
    assert sorted(outputs) == list(range(24))
    # by hand: the checkpoint in the signals model's own class (the same keys), stage 2 pooled by 4 as the debugger
    model = SignalCNN()
    model.load_state_dict(load_checkpoint_file(str(tmp_path / "named" / "epoch_0" / "checkpoint.pt"))[
        "model_state_dict"])
    signal = PlantedSignalsDataset(num_datapoints=24, split="val")[3]["inputs"]["signal"]
    with torch.no_grad():
        stage2 = model.eval().backbone[:2](signal[None])
    np.testing.assert_allclose(outputs[3]["stage2"]["output"], F.avg_pool1d(stage2, 4)[0].numpy(), atol=1e-5)


@pytest.mark.timeout(300)
def test_a_plain_sequence_model_on_padded_tokens_gives_each_datapoint_its_real_tokens_attention(tmp_path):
    """The sequences benchmark's data (padded tokens and their mask) into a plain model taking both by keyword;
    its tuple output named by the config; nn.MultiheadAttention's weights captured per datapoint."""
    data = {"class": PlantedSequencesDataset, "args": {"num_datapoints": 32, "split": "val"}}
    config = small_cnn_example(tmp_path / "tokens", {"class": TokenClassifier, "args": {
        "vocab_size": PlantedSequencesDataset.VOCAB_SIZE}})
    config.update(train_dataset={**data, "args": {"num_datapoints": 64, "split": "train"}}, val_dataset=data,
                  model_outputs=["logits", "embedding"], training_monitor=False,
                  debugger={"class": SequentialDebugger, "args": {"debuggers_config": [
                      {"name": "attention", "debugger_config": {"class": AttentionDebugger, "args": {
                          "layer_name": "encoder.self_attn"}}}]}})
    config.pop("scheduler")
    run = train(config)
    outputs = load_debug_outputs(run.epoch(1).path)
    dataset = build_from_config(data)
    assert sorted(outputs) == list(range(32))
    for idx in range(32):
        real = int(dataset[idx]["inputs"]["attention_mask"].sum())
        weights = np.asarray(outputs[idx]["attention"]["attention"])
        assert weights.shape == (2, real, real), idx
        np.testing.assert_allclose(weights.sum(-1), 1, atol=1e-5)


def test_a_model_taking_the_inputs_dict_with_its_outputs_named_by_the_config_is_given_the_dict():
    class DictInTupleOut(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Linear(3, 2)

        def forward(self, inputs: dict) -> tuple:
            return self.head(inputs["x"]), inputs["x"].sum(1)

    model = as_lantern_model(DictInTupleOut(), ModelCallSettings(model_outputs=["logits", "total"]), {"x": 1})
    assert "given the inputs dict" in model.describe()
    outputs = model({"x": torch.ones(4, 3)})
    assert list(outputs) == ["logits", "total"] and outputs["total"].tolist() == [3.0] * 4
