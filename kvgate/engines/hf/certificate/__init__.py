"""The attention-error certificate of an eviction arm: a Poisson sample of what eviction dropped, and the
per-step, per-head estimate and upper confidence bound of the attention-output error it induces."""
