"""The Training tab's figures stay bounded whatever a (crafted) monitor file holds: the learning rates of at most
``MAX_LR_GROUPS`` parameter groups are drawn, and a heatmap holds at most ``MAX_CELLS`` cells (or one per layer)."""

import numpy as np

from run_dir.training_log import EpochHistograms, TrainingLog
from runners.eval_viewer.training.figures import MAX_CELLS, MAX_LR_GROUPS, histogram_figure, loss_figure, norm_heatmap


def a_log(layers: int, groups: int, rows: int) -> TrainingLog:
    return TrainingLog(layers=[str(i) for i in range(layers)], layer_types=["Linear"] * layers,
                       steps=np.arange(rows), epochs=np.zeros(rows, np.int64), lr=np.full((rows, groups), 0.1),
                       grad_norm=np.ones((rows, layers), np.float32), weight_norm=np.ones((rows, layers), np.float32),
                       update_ratio=np.ones((rows, layers), np.float32),
                       grad_state=np.zeros((rows, layers), np.uint8), loss_steps=np.arange(rows),
                       losses=np.ones(rows, np.float32))


def test_the_learning_rates_of_a_few_groups_are_drawn_and_the_rest_counted():
    figure = loss_figure(a_log(3, 5_000, 20))
    rates = [trace for trace in figure.data if trace.name.startswith("learning rate")]
    assert len(rates) == MAX_LR_GROUPS
    assert "5000 parameter groups" in figure.layout.title.text


def test_a_heatmap_of_many_layers_keeps_to_its_cells():
    layers = 20_000
    figure = norm_heatmap(a_log(layers, 1, 60), "grad_norm")
    assert np.asarray(figure.data[0].z).size <= max(MAX_CELLS, layers)


def test_a_histogram_s_axis_says_it_counts():
    """its y-axis said "values" where it counts the values in each bin."""
    log = a_log(2, 1, 4)
    counts = np.array([[3, 5, 2], [1, 1, 8]])
    log.histograms = [EpochHistograms(0, 4, counts, np.array([[0.0, 1.0]] * 2), counts, np.array([[0.0, 1.0]] * 2),
                                      np.zeros(2, np.int64), np.zeros(2, np.int64), 0)]
    figure = histogram_figure(log, 1)
    assert figure.layout.yaxis.title.text == "count"
    assert list(figure.data[0].y) == [1, 1, 8]
