from typing import Any, Dict
import torch
from debuggers.forward_debugger import ForwardDebugger

class ActivationStatsDebugger(ForwardDebugger):
    """Example debugger for collecting activation statistics."""

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> Dict[str, Any]:
        """Collect detailed activation statistics."""
        if isinstance(output, torch.Tensor):
            activation = output.detach().cpu()

            # Compute comprehensive statistics
            stats = {
                'shape': list(activation.shape),
                'mean': float(activation.mean()),
                'std': float(activation.std()),
                'min': float(activation.min()),
                'max': float(activation.max()),
                'l1_norm': float(activation.abs().mean()),
                'l2_norm': float(activation.norm()),
                'sparsity': float((activation == 0).float().mean()),
                'positive_ratio': float((activation > 0).float().mean()),
                'saturation_low': float((activation <= -1).float().mean()),
                'saturation_high': float((activation >= 1).float().mean()),
            }

            # Add channel-wise statistics if applicable
            if len(activation.shape) >= 3:  # Has channel dimension
                channel_means = activation.mean(dim=(0, 2, 3)) if len(activation.shape) == 4 else activation.mean(dim=0)
                stats['channel_means'] = channel_means.tolist()
                stats['channel_stds'] = (activation.std(dim=(0, 2, 3)) if len(activation.shape) == 4 else activation.std(dim=0)).tolist()

            return {
                'layer_name': self.layer_name,
                'module_type': type(module).__name__,
                'activation_stats': stats,
                'sample_values': activation.flatten()[:100].tolist()  # First 100 values for inspection
            }
        return {'error': 'Output is not a tensor'}
