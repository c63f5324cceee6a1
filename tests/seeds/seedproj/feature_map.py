from typing import Any, Dict
import torch
from debuggers.forward_debugger import ForwardDebugger

class FeatureMapDebugger(ForwardDebugger):
    """Example debugger for extracting feature maps from forward hooks."""

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> Dict[str, Any]:
        """Extract and process feature maps."""
        if isinstance(output, torch.Tensor):
            return {
                'feature_map': output.detach().cpu(),
                'stats': {
                    'mean': float(output.mean()),
                    'std': float(output.std()),
                    'min': float(output.min()),
                    'max': float(output.max()),
                    'shape': list(output.shape)
                },
                'layer_name': self.layer_name
            }
        return {'error': 'Output is not a tensor'}
