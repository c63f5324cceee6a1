from typing import Any, Dict
import torch
from debuggers.forward_debugger import ForwardDebugger

class AttentionDebugger(ForwardDebugger):
    """Example debugger for extracting attention maps."""

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> Dict[str, Any]:
        """Extract attention patterns."""
        if isinstance(output, torch.Tensor):
            # Assume output is attention weights
            attention = output.detach().cpu()

            # Get attention statistics
            attention_stats = {
                'entropy': float(-torch.sum(attention * torch.log(attention + 1e-8), dim=-1).mean()),
                'max_attention': float(attention.max()),
                'attention_distribution': attention.mean(dim=0) if len(attention.shape) > 1 else attention
            }

            return {
                'attention_map': attention,
                'attention_stats': attention_stats,
                'layer_name': self.layer_name
            }
        return {'error': 'Output is not a tensor'}
