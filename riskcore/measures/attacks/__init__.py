"""Attack-based risk (anonymeter): singling out, linkability and inference.

Each attack family is one module with its parameters, computation and report text; ``gower``
is the mixed-type distance they share and ``common`` their tables, checks and result.
"""
