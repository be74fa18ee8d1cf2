# DOC: 003_15  seed 003_2bbe9edb939ae6af.txt lines 359-375, under "Step 6.2: Add documentation"
# EXPECT-OUT: table header Layer (type) / Param # / Trainable :: Layer \(type\)\s+.*Param #\s+.*Trainable
# EXPECT-OUT: Total params line :: Total params: [\d,]+
# EXPECT-OUT: Trainable params line :: Trainable params: [\d,]+
# EXPECT-OUT: Non-trainable params line :: Non-trainable params: [\d,]+
# EXPECT-OUT: the 784 -> 128 -> 10 MLP: 101,770 params :: Total params: 101,770
# ---- placeholders (not in the document) ----
import mlx.core as mx
import mlx.nn as nn
import nbinspect.mlx
import nbi_check as check
DOCSTRING = check.block(r'''
# ---- document block (as written; only the substitutions above) ----
"""
Model Summary Utilities
======================

This module provides utilities for generating model summaries similar to 
PyTorch's torchinfo.

Example usage:
    >>> model = nn.Sequential(
    ...     nn.Linear(784, 128),
    ...     nn.ReLU(),
    ...     nn.Linear(128, 10)
    ... )
    >>> print(nn.summary(model, input_shape=(784,)))
"""
# ---- end of document block ----
''')
# ---- checks (not in the document) ----
import doctest
# the docstring's example as a user pastes it (nn.summary -> nbinspect.mlx.summary)
import ast
text = ast.literal_eval(DOCSTRING)  # the block is a docstring literal
examples = doctest.DocTestParser().get_examples(text.replace("nn.summary(", "nbinspect.mlx.summary("))
namespace = {"nn": nn, "nbinspect": nbinspect}
for ex in examples:
    exec(compile(ex.source, "<docstring>", "exec"), namespace)
