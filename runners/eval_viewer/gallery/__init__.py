"""The Gallery tab: the table's rows as pictures, a page of tiles at a time."""
