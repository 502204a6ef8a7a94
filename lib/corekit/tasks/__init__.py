"""Task data: Markov-chain sequences (more tasks land beside it, one module each)."""
