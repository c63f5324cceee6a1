from debuggers.wrappers.sequential_debugger import SequentialDebugger

__all__ = ["SequentialDebugger"]
