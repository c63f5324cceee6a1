"""The seed's place of ``load_debug_outputs(epoch_dir)``: the reader lives with the page storage it reads
(``debuggers.pages.reader``), where analysis can use it without reaching up into the viewer."""

from debuggers.pages.reader import DEBUGGER_DIR, DebugOutputs, load_debug_outputs

__all__ = ["DEBUGGER_DIR", "DebugOutputs", "load_debug_outputs"]
