from typing import Any, Dict
import torch
from debuggers.base_debugger import BaseDebugger

class GradCAMDebugger(BaseDebugger):
    """Example post-forward debugger for computing GradCAM."""

    def __init__(self, target_layer: str, target_class: int = None):
        self.target_layer = target_layer
        self.target_class = target_class

    def __call__(self, datapoint: Dict[str, Dict[str, Any]], model: torch.nn.Module) -> Dict[str, Any]:
        """Compute GradCAM for the target layer."""
        # Extract inputs and outputs
        inputs = datapoint['inputs']
        outputs = datapoint['outputs']

        # Now we have access to the model for gradient computation
        # In practice, you'd use the model to compute gradients and apply GradCAM algorithm
        # For demonstration, we'll create a simple mock GradCAM
        if isinstance(outputs, torch.Tensor):
            # Mock GradCAM as attention over the spatial dimensions
            B, C = outputs.shape[:2]
            if len(outputs.shape) >= 4:  # Has spatial dimensions
                H, W = outputs.shape[2:4]
                gradcam = torch.rand(B, H, W)  # Mock GradCAM
            else:
                gradcam = torch.rand(B, 8, 8)  # Mock spatial GradCAM

            return {
                'gradcam': gradcam.detach().cpu(),
                'target_layer': self.target_layer,
                'target_class': self.target_class,
                'gradcam_stats': {
                    'mean': float(gradcam.mean()),
                    'std': float(gradcam.std()),
                    'shape': list(gradcam.shape)
                }
            }
        else:
            return {'error': 'Model output is not a tensor'}
