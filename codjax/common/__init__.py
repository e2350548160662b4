"""Run utilities every layer may use (metrics files and progress bars, stop signals); imports nothing of codjax."""
