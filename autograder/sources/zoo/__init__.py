"""The bug zoo's catalogue: it quotes the reference, so the sandbox and every zip leave it out."""
