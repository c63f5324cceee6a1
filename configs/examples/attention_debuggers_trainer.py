"""Every ready-made debugger that applies to the demo attention model, at every epoch.

    python main.py --config-filepath configs/examples/attention_debuggers_trainer.py
"""

from configs.examples.all_debuggers_trainer import entry, tour
from configs.examples.attention_trainer import config as attention_config
from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger

config = tour(attention_config, [
    entry("block0_attention", AttentionDebugger, layer_name="blocks.0.attn"),
    entry("block1_attention", AttentionDebugger, layer_name="blocks.1.attn"),
    entry("captured", CaptureDebugger, states=["embeddings", "position_encoding"]),
    entry("patch_features", FeatureMapDebugger, layer_name="patch_embed", max_channels=16),
    entry("block1_mlp_stats", ActivationStatsDebugger, layer_name="blocks.1.mlp"),
    entry("block0_mlp_output", LayerOutputDebugger, layer_name="blocks.0.mlp", downsample_factor=1),
    entry("gradcam_patches", GradCAMDebugger, target_layer="patch_embed"),
    entry("nan_origin", NaNInfDebugger),
    entry("gradient_flow", GradientFlowDebugger, layer_types=["Conv2d", "Linear"]),
])
