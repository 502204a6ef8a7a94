"""Per-chapter code: what belongs to one notebook of the book but not to the library (its checks on its parameters)."""
