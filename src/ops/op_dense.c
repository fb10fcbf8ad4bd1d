/* op_dense.c - the linear layer, y = act(x W^T + b) with W [out, in] as in
 * PyTorch: one GEMM whose epilogue adds the bias and applies the activation
 * as it stores y (own kernels fuse it; after CLBlast it is one more pass);
 * backward applies act' in place, then GEMMs for dx and dW and a column sum
 * for db; with a bias and a batch's few rows, act' and the column sum are
 * one pass before the GEMMs (nncl_bias_backward_f32_act). Also the shared
 * launch helpers conv2d uses for bias and act. */
#include "ops/ops.h"
#include <math.h>

/* linear's own kernel slot, after the shared dense ones */
enum { LINEAR_K_BIAS_ACT_BACKWARD = NNCL_K_DENSE_END };

double nncl__act_ref(double v, int act) {
    if (act == NNCL_ACT_RELU) return v < 0 ? 0 : v; /* NaN stays NaN, as in PyTorch */
    if (act == NNCL_ACT_SIGMOID) return 1 / (1 + exp(-v));
    if (act == NNCL_ACT_TANH) return tanh(v);
    return v;
}

double nncl__act_grad_ref(double y, int act) {
    if (act == NNCL_ACT_RELU) return y > 0 ? 1 : 0;
    if (act == NNCL_ACT_SIGMOID) return y * (1 - y);
    if (act == NNCL_ACT_TANH) return 1 - y * y;
    return 1;
}

nncl_status nncl__bias_act(nncl__exec *ex, const nncl_node *n, nncl__view y, const nncl_node *bias, int cols, int inner,
                           size_t count, int act) {
    nncl__args a;
    nncl__view b = bias ? nncl__val(ex, bias) : y;
    if (!bias && act == NNCL_ACT_NONE) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_K_BIAS_ACT, &a));
    nncl__arg_view(&a, y);
    nncl__arg_view(&a, b);
    nncl__arg_int(&a, bias != NULL);
    nncl__arg_int(&a, cols);
    nncl__arg_int(&a, inner);
    nncl__arg_int(&a, (int)count);
    nncl__arg_int(&a, act);
    return nncl__launch_1d(&a, ex->dev, count);
}

nncl_status nncl__act_backward_inplace(nncl__exec *ex, const nncl_node *n, nncl__view dy, nncl__view y, size_t count,
                                       int act) {
    nncl__args a;
    if (act == NNCL_ACT_NONE) return NNCL_OK;
    NNCL_TRY(nncl__kbegin(ex, n, NNCL_K_ACT_BACKWARD, &a));
    nncl__arg_view(&a, dy);
    nncl__arg_view(&a, y);
    nncl__arg_int(&a, (int)count);
    nncl__arg_int(&a, act);
    return nncl__launch_1d(&a, ex->dev, count);
}

nncl_status nncl__bias_grad(nncl__exec *ex, const nncl_node *n, nncl__view dy, int rows, int cols, int inner,
                            nncl__view db, int acc) {
    return nncl__k_bias_backward(nncl__kl_of(ex, n, NNCL_K_BIAS_GRAD), dy, rows, cols, inner, db, acc);
}

/* ------------------------------------------------------------- linear */

/* iattr[0]: the fused activation, an nncl_act. */
static nncl_status linear_check(nncl_graph *g, const nncl_node *n) {
    if (n->iattr[0] < (int)NNCL_ACT_NONE || n->iattr[0] > (int)NNCL_ACT_TANH)
        return nncl__graph_error(g, NNCL_ERR_INVALID_ARGUMENT, "linear \"%s\": act %d is not a known nncl_act", n->name,
                                 n->iattr[0]);
    return NNCL_OK;
}

static nncl_status linear_shape(nncl_graph *g, nncl_node *n) {
    nncl_node *xin = n->in[0], *w = n->in[1];
    char s1[64], s2[64];
    int i, in_f = xin->shape[xin->ndim - 1];
    if (w->ndim != 2 || w->shape[1] != in_f || (n->n_in == 3 && (n->in[2]->ndim != 1 || n->in[2]->shape[0] != w->shape[0])))
        return nncl__graph_error(g, NNCL_ERR_SHAPE, "linear \"%s\": input %s does not fit weight %s", n->name,
                                 nncl__shape_str(xin, s1, sizeof s1), nncl__shape_str(w, s2, sizeof s2));
    n->batched = xin->batched;
    n->ndim = xin->ndim;
    for (i = 0; i < xin->ndim; i++) n->shape[i] = xin->shape[i];
    n->shape[n->ndim - 1] = w->shape[0];
    return NNCL_OK;
}

/* GEMM arguments: rows of x times W^T into y, bias and activation in the
 * epilogue. */
void nncl__gemm_args_begin(const nncl__exec *ex, float beta, nncl__gemm_args *g) {
    memset(g, 0, sizeof *g);
    g->alpha = 1;
    g->beta = beta;
    g->temp = ex->gemm_temp;
    g->store = ex->store;
    g->temp_cap = ex->gemm_cap;
}

static void linear_gemm_fwd(nncl__exec *ex, const nncl_node *n, nncl__gemm_args *g) {
    const nncl_node *w = n->in[1];
    nncl__view xv = nncl__val(ex, n->in[0]), wv = nncl__val(ex, w), yv = nncl__val(ex, n);
    nncl__gemm_args_begin(ex, 0, g);
    g->trans_b = 1;
    g->m = nncl__numel(n->in[0], ex->batch) / (size_t)w->shape[1];
    g->n = (size_t)w->shape[0];
    g->k = (size_t)w->shape[1];
    g->a = xv.mem; g->a_off = xv.off; g->lda = g->k;
    g->b = wv.mem; g->b_off = wv.off; g->ldb = g->k;
    g->c = yv.mem; g->c_off = yv.off; g->ldc = g->n;
    if (n->n_in == 3) {
        nncl__view bv = nncl__val(ex, n->in[2]);
        g->epi.bias = 1;
        g->epi.bias_mem = bv.mem;
        g->epi.bias_off = bv.off;
    }
    g->epi.act = n->iattr[0];
}

static nncl_status linear_forward(nncl__exec *ex, nncl_node *n) {
    nncl__gemm_args g;
    linear_gemm_fwd(ex, n, &g);
    return nncl__sgemm(ex->ctx, ex->dev, &g);
}

/* The two backward GEMMs, from dy [m, n]: dx [m, k] = dy W; dW [n, k] = dy^T x. */
static void linear_gemm_bwd(nncl__exec *ex, const nncl_node *n, int which, int acc, nncl__gemm_args *g) {
    nncl__gemm_args f;
    nncl__view dy = nncl__grd(ex, n);
    linear_gemm_fwd(ex, n, &f);
    nncl__gemm_args_begin(ex, acc ? 1.0f : 0.0f, g);
    g->c_f32 = which == 1 && n->in[1]->op == NNCL_OP_PARAM; /* a weight gradient stays fp32 */
    if (which == 0) {
        nncl__view dx = nncl__grd(ex, n->in[0]);
        g->m = f.m; g->n = f.k; g->k = f.n;
        g->a = dy.mem; g->a_off = dy.off; g->lda = f.n;
        g->b = f.b; g->b_off = f.b_off; g->ldb = f.k;
        g->c = dx.mem; g->c_off = dx.off; g->ldc = f.k;
    } else {
        nncl__view dw = nncl__grd(ex, n->in[1]);
        g->trans_a = 1;
        g->m = f.n; g->n = f.k; g->k = f.m;
        g->a = dy.mem; g->a_off = dy.off; g->lda = f.n;
        g->b = f.a; g->b_off = f.a_off; g->ldb = f.k;
        g->c = dw.mem; g->c_off = dw.off; g->ldc = f.k;
    }
}

static nncl_status linear_prepare(nncl__exec *ex, nncl_node *n, size_t *temp) {
    nncl__gemm_args g;
    size_t b = 0;
    int which;
    linear_gemm_fwd(ex, n, &g);
    NNCL_TRY(nncl__sgemm_prepare(ex->ctx, ex->dev, &g, temp));
    for (which = 0; which < 2; which++) {
        if (!nncl__need_grad(ex, n, which)) continue;
        linear_gemm_bwd(ex, n, which, 0, &g);
        NNCL_TRY(nncl__sgemm_prepare(ex->ctx, ex->dev, &g, &b));
        if (b > *temp) *temp = b;
    }
    return NNCL_OK;
}

/* Rows up to which act' and the bias gradient are one pass (a work-item
 * per column loops over them); beyond, the column sums take a tree. */
#define LINEAR_FUSED_ROWS 4096

static nncl_status linear_backward(nncl__exec *ex, nncl_node *n) {
    nncl__gemm_args g;
    size_t rows, out_f = (size_t)n->in[1]->shape[0];
    int which, fused;
    rows = nncl__numel(n, ex->batch) / out_f;
    fused = n->n_in == 3 && nncl__need_grad(ex, n, 2) && rows <= LINEAR_FUSED_ROWS;
    if (fused)
        NNCL_TRY(nncl__k_bias_backward_act(nncl__kl_of(ex, n, LINEAR_K_BIAS_ACT_BACKWARD), nncl__grd(ex, n),
                                           nncl__val(ex, n), rows, out_f, nncl__grd(ex, n->in[2]),
                                           nncl__grad_accumulate(ex, n, 2), n->iattr[0]));
    else
        NNCL_TRY(nncl__act_backward_inplace(ex, n, nncl__grd(ex, n), nncl__val(ex, n), rows * out_f, n->iattr[0]));
    for (which = 0; which < 2; which++) {
        if (!nncl__need_grad(ex, n, which)) continue;
        linear_gemm_bwd(ex, n, which, nncl__grad_accumulate(ex, n, which), &g);
        NNCL_TRY(nncl__sgemm(ex->ctx, ex->dev, &g));
    }
    if (n->n_in == 3 && nncl__need_grad(ex, n, 2) && !fused)
        NNCL_TRY(nncl__bias_grad(ex, n, nncl__grd(ex, n), (int)rows, (int)out_f, 1, nncl__grd(ex, n->in[2]),
                                 nncl__grad_accumulate(ex, n, 2)));
    return NNCL_OK;
}

static void linear_ref_forward(const nncl_node *n, const nncl__refctx *r, const double *const *in, double *out,
                               double *aux) {
    size_t in_f = (size_t)n->in[1]->shape[1], out_f = (size_t)n->in[1]->shape[0];
    size_t rows = nncl__numel(n, r->batch) / out_f, i, j, k;
    (void)aux;
    for (i = 0; i < rows; i++)
        for (j = 0; j < out_f; j++) {
            double s = n->n_in == 3 ? in[2][j] : 0;
            for (k = 0; k < in_f; k++) s += in[0][i * in_f + k] * in[1][j * in_f + k];
            out[i * out_f + j] = nncl__act_ref(s, n->iattr[0]);
        }
}

static void linear_ref_backward(const nncl_node *n, const nncl__refctx *r, const double *const *in, const double *out,
                                const double *gout, double *const *gin, double *aux) {
    size_t in_f = (size_t)n->in[1]->shape[1], out_f = (size_t)n->in[1]->shape[0];
    size_t rows = nncl__numel(n, r->batch) / out_f, i, j, k;
    (void)aux;
    for (i = 0; i < rows; i++)
        for (j = 0; j < out_f; j++) {
            double d = gout[i * out_f + j] * nncl__act_grad_ref(out[i * out_f + j], n->iattr[0]);
            if (n->n_in == 3 && gin[2]) gin[2][j] += d;
            for (k = 0; k < in_f; k++) {
                if (gin[0]) gin[0][i * in_f + k] += d * in[1][j * in_f + k];
                if (gin[1]) gin[1][j * in_f + k] += d * in[0][i * in_f + k];
            }
        }
}

const nncl__opdef nncl__opdef_linear = {
    .name = "linear", NNCL_KERNELS(NNCL_DENSE_KERNELS, {"dense", "nncl_bias_backward_f32_act"}), .shape = linear_shape,
    .check = linear_check, .prepare = linear_prepare,
    .forward = linear_forward, .backward = linear_backward, .bw_reads = NNCL_BW_INPUTS | NNCL_BW_OUTPUT,
    .ref_forward = linear_ref_forward, .ref_backward = linear_ref_backward, .half = 2};

/* Creates NAME.weight (and NAME.bias) with PyTorch's default
 * initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
nncl_node *nncl_linear(nncl_graph *g, nncl_node *x, int out_features, int bias, nncl_act act, const char *name) {
    char wn[NNCL_NAME_MAX + 8], bn[NNCL_NAME_MAX + 8], s1[64];
    nncl_node *in[3];
    int wshape[2], iattr[1], keep;
    float bound;
    if (!g || !x) return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_linear: graph or input is NULL");
    if (!name || !*name || strlen(name) + 8 > NNCL_NAME_MAX)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_linear: needs a name of 1 to %d characters",
                                NNCL_NAME_MAX - 8);
    if (out_features <= 0)
        return nncl__graph_fail(g, NNCL_ERR_INVALID_ARGUMENT, "nncl_linear \"%s\": needs out_features > 0, got %d",
                                name, out_features);
    if (x->ndim < (x->batched ? 2 : 1))
        return nncl__graph_fail(g, NNCL_ERR_SHAPE, "linear \"%s\": input %s has no feature dimension", name,
                                nncl__shape_str(x, s1, sizeof s1));
    keep = g->n_nodes;
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    wshape[0] = out_features;
    wshape[1] = x->shape[x->ndim - 1];
    bound = 1.0f / sqrtf((float)wshape[1]);
    in[0] = x;
    in[1] = nncl_param(g, wn, 2, wshape, NNCL_INIT_UNIFORM, bound);
    in[2] = bias && in[1] ? nncl_param(g, bn, 1, wshape, NNCL_INIT_UNIFORM, bound) : NULL;
    iattr[0] = (int)act;
    return nncl__layer_add(g, keep, NNCL_OP_LINEAR, name, bias ? 3 : 2, in, iattr, 1, NULL, 0);
}

#undef LINEAR_FUSED_ROWS
