from runners.trainers.base_trainer import BaseTrainer

__all__ = ["BaseTrainer"]
