"""Language models: the shared shape config, its FLOP accounting, the haliax model.

    from marin.models import TransformerConfig
    from marin.models.transformer import TransformerLM

Importing ``marin.models`` installs the jax compatibility shim that haliax needs on newer
jax (``marin.models.jax_compat``): at once when JAX is already imported, else as soon as it
is. It does not import JAX itself, so the config and FLOP accounting stay light.
"""

from marin.models import jax_compat
from marin.models.config import TransformerConfig

jax_compat.install()

__all__ = ["TransformerConfig"]
