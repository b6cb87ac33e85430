"""The memory hierarchy's logic: policies applied to what the store holds, off the write path."""
