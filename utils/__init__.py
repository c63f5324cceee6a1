"""Small helpers shared by every part of Lantern."""
