"""Pictures of datapoints served by address: the table's thumbnails and the gallery's tiles."""
