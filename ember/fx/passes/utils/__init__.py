"""``torch.fx.passes.utils``: helpers of graph passes (``matcher_utils.SubgraphMatcher``).

Example:
    >>> from ember.fx.passes.utils.matcher_utils import SubgraphMatcher
    >>> SubgraphMatcher.__name__
    'SubgraphMatcher'
"""
