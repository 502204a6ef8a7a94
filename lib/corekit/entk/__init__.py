"""Empirical neural tangent kernels: exact kernels, kernel-vector products, the residual-stream operator
of a language model, and top eigenpairs.

A model is a pure function ``fn(params, x) -> outputs (N, C)`` of a dict of parameter tensors. Its
empirical NTK is K_{cc'}(n, m) = Σ_μ ∂f_c(x_n)/∂θ_μ · ∂f_c'(x_m)/∂θ_μ, and a *per-parameter* kernel
restricts the sum to one parameter tensor, so the per-parameter kernels add up to the full one.

============== ===================================================================================
module          job
============== ===================================================================================
``functional``  models as functions of their parameters (:func:`functional_mlp`, :func:`functional_transformer`)
``exact``       exact per-parameter kernels (:func:`kernels`, :func:`jacobian_kernels`) and their modes
``matvec``      K V without K (:func:`kernel_matvec`)
``strategies``  the three named strategies behind one call (:func:`kernel`)
``eigen``       top eigenpairs and their residual checks (:func:`lanczos`, :func:`top_eigenpairs`)
``residual``    a causal LM module's eNTK on the residual stream (:class:`ResidualStreamNTK`)
``parameters``  one model of a ``BatchedTransformer`` by parameter and group (:func:`parameter_eigenpairs`)
============== ===================================================================================
"""
from corekit.entk.eigen import Eigenpairs, cliff_edges, dense_eigenpairs, group_eigenpairs, lanczos, top_eigenpairs
from corekit.entk.exact import MODES, contract, flatten, jacobian_kernels, jacobians, kernels, total
from corekit.entk.functional import FunctionalModel, LinearSite, Params, functional_mlp, functional_transformer
from corekit.entk.matvec import kernel_matvec
from corekit.entk.parameters import parameter_eigenpairs, parameter_group_eigenpairs, unembedding_alignment
from corekit.entk.residual import ResidualStreamNTK, eigenvector_scores, psd_sqrt, unembedding_gram
from corekit.entk.strategies import STRATEGIES, kernel

__all__ = ["Eigenpairs", "cliff_edges", "dense_eigenpairs", "group_eigenpairs", "lanczos", "top_eigenpairs", "MODES",
           "contract", "flatten", "jacobian_kernels", "jacobians", "kernels", "total", "FunctionalModel",
           "LinearSite", "Params", "functional_mlp", "functional_transformer", "kernel_matvec", "parameter_eigenpairs",
           "parameter_group_eigenpairs", "unembedding_alignment",
           "ResidualStreamNTK", "eigenvector_scores", "psd_sqrt", "unembedding_gram", "STRATEGIES", "kernel"]
