"""Known mistakes, as the feedback names them, that both the tests and the oracles refer to.

The oracles (``tests.graded.oracles``) reproduce these mistakes; the tests name them. This
module ships in the student handout (the names are feedback, not answers); the oracles do not.
"""

# Part 1
NO_SCALE = "scores not scaled by 1/sqrt(d_k)"
SCALE_DK = "scores scaled by 1/d_k instead of 1/sqrt(d_k)"
SCALE_DV = "scores scaled by 1/sqrt(d_v) instead of 1/sqrt(d_k)"
WRONG_AXIS = "softmax over the queries axis (dim=-2) instead of the keys (dim=-1)"
AFTER = "mask applied after the softmax without renormalizing"
INVERTED = "bool mask inverted (True treated as permitted; True means prohibited)"

# Part 3
FLOAT_AS_BOOL = (
    "a float mask turned into a bool one (nonzero = prohibited); a float mask is added to "
    "the scores"
)
SPLIT_NO_T = "split_heads reshapes straight to (B, h, T, d_h) without the transpose"
MERGE_NO_T = "merge_heads reshapes (B, h, T, d_h) to (B, T, D) without the transpose"
CROSS_FROM_X = "cross-attention takes keys and values from x instead of context"
TRUE_DIVISION = "d_head = d_model / n_heads gives a float; use d_model // n_heads"

# Part 5
RESIDUAL = "the residual adds the normalized tensor (h = ln1(x) + attn(ln1(x))); add the incoming x"
RESIDUALS = "the residuals add the normalized tensors (ln(x) + f(ln(x))); add the incoming tensors"

# Part 7
HARD_128 = "a size hard-coded to 128 (mask, position table, cache) instead of max_len"
PAD_COUNTED = (
    "padding counted: the mean divides by every position, not the real targets"
)
PAD_AS_CLASS = "padding scored as a target of class 0 instead of being ignored"
#: Where train's loop calls zero_grad and step, when it is wrong (``oracle_training``'s
#: ``schedule``).
ZERO_GRAD_PER_EPOCH = (
    "zero_grad called once per epoch, not before each batch's backward (the gradients of "
    "the epoch's batches add up)"
)
STEP_PER_EPOCH = (
    "one optimizer step per epoch on the gradients of all its batches, not one step per "
    "batch"
)
LAST_BATCH_STEPS = (
    "optimizer.step() after the batch loop: only the last batch's gradients are applied"
)
BATCH_MEANS = (
    "mean of batch means (the notebook's epoch average) instead of "
    "total loss / total tokens"
)
