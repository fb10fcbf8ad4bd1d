/* launch.c - the typed launch wrappers of launch.h: each kernel's arguments
 * in the order its cl/ source declares them, and the launch shape it needs
 * (one work-item per element, one group per row, or column groups). */
#include "runtime/launch.h"

nncl_status nncl__kl_find(nncl_context *ctx, nncl_device *dev, const char *family, const char *name, nncl__kl *out) {
    out->ctx = ctx;
    out->dev = dev;
    out->slot.kernel = NULL;
    out->slot.wg = 0; /* asked by the launches that need it (rows, columns): an eager add asks nothing */
    return nncl__kernel(ctx, dev, family, name, &out->slot.kernel);
}

static nncl_status launch_begin(const nncl__kl *k, nncl__args *a) {
    if (!k->slot.kernel) return NNCL_ERR_STATE; /* whoever made k recorded why */
    nncl__args_begin_slot(a, k->ctx, &k->slot);
    return NNCL_OK;
}

/* Rows of ceil(bn / per) work-items of per elements each (groups a power
 * of two up to 64 wide), n / bn of them. */
static nncl_status k_binary_rows(nncl__kl k, nncl__view a, nncl__view b, size_t bn, nncl__view out, size_t n,
                                 size_t per) {
    nncl__args g;
    size_t global[2], local[2] = {1, 1}, items = (bn + per - 1) / per;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, a);
    nncl__arg_view(&g, b);
    nncl__arg_count(&g, bn);
    nncl__arg_view(&g, out);
    nncl__arg_count(&g, n);
    while (local[0] < items && local[0] < 64 && local[0] * 2 <= k.dev->max_work_group) local[0] *= 2;
    global[0] = items;
    global[1] = bn ? n / bn : 0;
    return nncl__launch(&g, k.dev, 2, global, local);
}

nncl_status nncl__k_binary(nncl__kl k, nncl__view a, nncl__view b, size_t bn, nncl__view out, size_t n) {
    return k_binary_rows(k, a, b, bn, out, n, 1);
}

nncl_status nncl__k_binary8(nncl__kl k, nncl__view a, nncl__view b, size_t bn, nncl__view out, size_t n) {
    return k_binary_rows(k, a, b, bn, out, n, 8);
}

nncl_status nncl__k_unary(nncl__kl k, nncl__view x, nncl__view y, size_t n, const float *p) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, x);
    nncl__arg_view(&g, y);
    nncl__arg_count(&g, n);
    if (p) nncl__arg_float(&g, *p);
    return nncl__launch_1d(&g, k.dev, n);
}

nncl_status nncl__k_unary_backward(nncl__kl k, nncl__view dy, nncl__view v, nncl__view dx, size_t n, const float *p,
                                   int acc) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, dy);
    nncl__arg_view(&g, v);
    nncl__arg_view(&g, dx);
    nncl__arg_count(&g, n);
    if (p) nncl__arg_float(&g, *p);
    nncl__arg_int(&g, acc);
    return nncl__launch_1d(&g, k.dev, n);
}

nncl_status nncl__k_fill(nncl__kl k, nncl__view y, size_t n, float value) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, y);
    nncl__arg_count(&g, n);
    nncl__arg_float(&g, value);
    return nncl__launch_1d(&g, k.dev, n);
}

nncl_status nncl__k_axpy(nncl__kl k, nncl__view x, nncl__view y, size_t n, float alpha, int acc) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, x);
    nncl__arg_view(&g, y);
    nncl__arg_count(&g, n);
    nncl__arg_float(&g, alpha);
    nncl__arg_int(&g, acc);
    return nncl__launch_1d(&g, k.dev, n);
}

nncl_status nncl__k_axpy8(nncl__kl k, nncl__view x, nncl__view y, size_t n, float alpha, int acc) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, x);
    nncl__arg_view(&g, y);
    nncl__arg_count(&g, n);
    nncl__arg_float(&g, alpha);
    nncl__arg_int(&g, acc);
    return nncl__launch_1d(&g, k.dev, (n + 7) / 8); /* 8 per work-item */
}

nncl_status nncl__k_mul_backward(nncl__kl k, nncl__view dy, nncl__view other, size_t on, nncl__view dx, size_t n,
                                 int acc) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, dy);
    nncl__arg_view(&g, other);
    nncl__arg_count(&g, on);
    nncl__arg_view(&g, dx);
    nncl__arg_count(&g, n);
    nncl__arg_int(&g, acc);
    return nncl__launch_1d(&g, k.dev, n);
}

nncl_status nncl__k_mul_backward_bcast(nncl__kl k, nncl__view dy, nncl__view a, nncl__view db, size_t rows,
                                       size_t cols, int acc) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, dy);
    nncl__arg_view(&g, a);
    nncl__arg_view(&g, db);
    nncl__arg_count(&g, rows);
    nncl__arg_count(&g, cols);
    nncl__arg_int(&g, acc);
    return nncl__launch_1d(&g, k.dev, cols);
}

nncl_status nncl__k_store(nncl__kl k, nncl__view dst, nncl__view src, size_t n) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, dst);
    nncl__arg_view(&g, src);
    nncl__arg_count(&g, n);
    return nncl__launch_1d(&g, k.dev, (n + 7) / 8); /* 8 per work-item */
}

nncl_status nncl__k_bias_backward_act(nncl__kl k, nncl__view dy, nncl__view y, size_t rows, size_t cols, nncl__view db,
                                      int acc, int act) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, dy);
    nncl__arg_view(&g, y);
    nncl__arg_count(&g, rows);
    nncl__arg_count(&g, cols);
    nncl__arg_view(&g, db);
    nncl__arg_int(&g, acc);
    nncl__arg_int(&g, act);
    return nncl__launch_1d(&g, k.dev, (cols + 7) / 8); /* 8 columns per work-item */
}

nncl_status nncl__k_bias_backward(nncl__kl k, nncl__view dy, int rows, int cols, int inner, nncl__view db, int acc) {
    nncl__args g;
    size_t local = 64, global;
    if (local > k.dev->max_work_group) local = k.dev->max_work_group;
    while (local > 1 && local / 2 >= (size_t)rows * (size_t)inner) local /= 2; /* no idle items in a small sum */
    global = (size_t)cols * local;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, dy);
    nncl__arg_int(&g, rows);
    nncl__arg_int(&g, cols);
    nncl__arg_int(&g, inner);
    nncl__arg_view(&g, db);
    nncl__arg_int(&g, acc);
    nncl__arg_local(&g, local * sizeof(float));
    return nncl__launch(&g, k.dev, 1, &global, &local);
}

nncl_status nncl__k_softmax(nncl__kl k, nncl__view x, nncl__view y, size_t rows, size_t cols) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, x);
    nncl__arg_view(&g, y);
    nncl__arg_count(&g, rows);
    nncl__arg_count(&g, cols);
    return nncl__launch_rows(&g, k.dev, rows, cols);
}

nncl_status nncl__k_softmax_backward(nncl__kl k, nncl__view dy, nncl__view y, nncl__view dx, size_t rows, size_t cols,
                                     int acc) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, dy);
    nncl__arg_view(&g, y);
    nncl__arg_view(&g, dx);
    nncl__arg_count(&g, rows);
    nncl__arg_count(&g, cols);
    nncl__arg_int(&g, acc);
    return nncl__launch_rows(&g, k.dev, rows, cols);
}

/* The arguments both column-sum launches take. */
static nncl_status sum_begin(nncl__kl *k, nncl__args *g, nncl__view x, nncl__view out, size_t rows, size_t cols,
                             float alpha, int acc) {
    NNCL_TRY(launch_begin(k, g));
    nncl__arg_view(g, x);
    nncl__arg_view(g, out);
    nncl__arg_count(g, rows);
    nncl__arg_count(g, cols);
    nncl__arg_float(g, alpha);
    nncl__arg_int(g, acc);
    return NNCL_OK;
}

nncl_status nncl__k_sum(nncl__kl k, int axis, nncl__view x, nncl__view out, size_t rows, size_t cols, float alpha,
                        int acc) {
    nncl__args g;
    NNCL_TRY(sum_begin(&k, &g, x, out, rows, cols, alpha, acc));
    return axis ? nncl__launch_rows(&g, k.dev, rows, cols) : nncl__launch_cols(&g, k.dev, rows, cols);
}

nncl_status nncl__k_sum_cols(nncl__kl k, nncl__view x, nncl__view out, size_t rows, size_t cols, float alpha, int acc) {
    nncl__args g;
    NNCL_TRY(sum_begin(&k, &g, x, out, rows, cols, alpha, acc));
    return nncl__launch_1d(&g, k.dev, (cols + 15) / 16);
}

nncl_status nncl__k_rnn_colsum(nncl__kl k, nncl__view m, size_t rows, size_t cols, size_t ld, size_t from, size_t shift,
                               nncl__view db, int acc) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, m);
    nncl__arg_count(&g, rows);
    nncl__arg_count(&g, cols);
    nncl__arg_count(&g, ld);
    nncl__arg_count(&g, from);
    nncl__arg_count(&g, shift);
    nncl__arg_view(&g, db);
    nncl__arg_int(&g, acc);
    return nncl__launch_1d(&g, k.dev, (cols + 7) / 8);
}

nncl_status nncl__k_ce_rows(nncl__kl k, nncl__view x, nncl__view labels, nncl__view probs, nncl__view terms,
                            size_t rows, size_t C) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, x);
    nncl__arg_view(&g, labels);
    nncl__arg_view(&g, probs);
    nncl__arg_view(&g, terms);
    nncl__arg_count(&g, rows);
    nncl__arg_count(&g, C);
    return nncl__launch_1d(&g, k.dev, rows);
}

nncl_status nncl__k_ce_backward(nncl__kl k, nncl__view probs, nncl__view labels, nncl__view g, nncl__view dx,
                                size_t rows, size_t C, int acc) {
    nncl__args a;
    NNCL_TRY(launch_begin(&k, &a));
    nncl__arg_view(&a, probs);
    nncl__arg_view(&a, labels);
    nncl__arg_view(&a, g);
    nncl__arg_view(&a, dx);
    nncl__arg_count(&a, rows);
    nncl__arg_count(&a, C);
    nncl__arg_int(&a, acc);
    return nncl__launch_1d(&a, k.dev, rows * C);
}

nncl_status nncl__k_pair_terms(nncl__kl k, nncl__view p, nncl__view t, nncl__view terms, size_t n) {
    nncl__args g;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, p);
    nncl__arg_view(&g, t);
    nncl__arg_view(&g, terms);
    nncl__arg_count(&g, n);
    return nncl__launch_1d(&g, k.dev, n);
}

nncl_status nncl__k_pair_backward(nncl__kl k, nncl__view p, nncl__view t, nncl__view g, nncl__view dp, int acc_p,
                                  nncl__view dt, int acc_t, int want_p, int want_t, size_t n) {
    nncl__args a;
    NNCL_TRY(launch_begin(&k, &a));
    nncl__arg_view(&a, p);
    nncl__arg_view(&a, t);
    nncl__arg_view(&a, g);
    nncl__arg_view(&a, dp);
    nncl__arg_int(&a, acc_p);
    nncl__arg_view(&a, dt);
    nncl__arg_int(&a, acc_t);
    nncl__arg_int(&a, want_p);
    nncl__arg_int(&a, want_t);
    nncl__arg_count(&a, n);
    return nncl__launch_1d(&a, k.dev, n);
}

nncl_status nncl__k_sum_scalar(nncl__kl k, nncl__view terms, size_t n, float scale, nncl__view out) {
    nncl__args g;
    size_t local = 64;
    while (local > k.dev->max_work_group) local /= 2;
    NNCL_TRY(launch_begin(&k, &g));
    nncl__arg_view(&g, terms);
    nncl__arg_count(&g, n);
    nncl__arg_float(&g, scale);
    nncl__arg_view(&g, out);
    nncl__arg_local(&g, local * sizeof(float));
    return nncl__launch(&g, k.dev, 1, &local, &local);
}
