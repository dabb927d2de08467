def permute_cols(x, perm):
    return x[:, perm]
