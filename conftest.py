"""Marks the repository root so pytest puts it on sys.path for imports."""
