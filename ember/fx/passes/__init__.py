"""``torch.fx.passes``: analyses and rewrites over fx graphs (``shape_prop.ShapeProp``,
``utils.matcher_utils.SubgraphMatcher``).

Example:
    >>> from ember.fx.passes.shape_prop import ShapeProp, TensorMetadata
    >>> TensorMetadata._fields[:3]
    ('shape', 'dtype', 'requires_grad')
"""
from ember.fx.passes import shape_prop

__all__ = ["shape_prop"]
