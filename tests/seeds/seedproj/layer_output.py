from typing import Any, Dict
import torch
import torch.nn.functional as F
from debuggers.forward_debugger import ForwardDebugger

class LayerOutputDebugger(ForwardDebugger):
    """Simple debugger that saves raw layer outputs."""

    def __init__(self, layer_name: str, downsample_factor: int = 4):
        super().__init__(layer_name)
        self.downsample_factor = downsample_factor

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> Dict[str, Any]:
        """Save layer output with optional downsampling."""
        if isinstance(output, torch.Tensor):
            output_cpu = output.detach().cpu()

            # Downsample if output is too large
            if len(output_cpu.shape) >= 3 and self.downsample_factor > 1:
                if len(output_cpu.shape) == 4:  # (B, C, H, W)
                    downsampled = F.avg_pool2d(output_cpu, self.downsample_factor)
                elif len(output_cpu.shape) == 3:  # (B, H, W) or (C, H, W)
                    downsampled = F.avg_pool2d(output_cpu.unsqueeze(0), self.downsample_factor).squeeze(0)
                else:
                    downsampled = output_cpu
            else:
                downsampled = output_cpu

            return {
                'layer_name': self.layer_name,
                'original_shape': list(output_cpu.shape),
                'output': downsampled,
                'downsampled': self.downsample_factor > 1,
                'downsample_factor': self.downsample_factor
            }
        return {'error': 'Output is not a tensor'}
