"""LLM providers behind one seam; ``none`` is the offline default."""
