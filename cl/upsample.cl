/* upsample.cl - upsampling of NCHW planes by whole factors fh, fw
 * (src/ops/op_upsample.c), PyTorch's Upsample / interpolate with a
 * scale_factor: nearest (source o / f) or bilinear with
 * align_corners=False (source (o + 0.5) / f - 0.5, clamped at 0, between
 * rows i0 and min(i0 + 1, H - 1)). */

/* Output o along an axis of `in` inputs: the two source indices and the
 * weight of the second. */
void nncl_upsample_src(int o, int f, int in, int mode, int *i0, int *i1, float *l1) {
    if (!mode) {
        *i0 = *i1 = o / f;
        *l1 = 0.0f;
        return;
    }
    float s = ((float)o + 0.5f) / (float)f - 0.5f;
    s = s < 0.0f ? 0.0f : s;
    *i0 = (int)s;
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *l1 = s - (float)*i0;
}

/* One work-item per output element. */
__kernel void nncl_upsample2d_f32(__global const act_t *x, int x_off, __global act_t *y, int y_off, int H, int W,
                                  int fh, int fw, int mode, int n) {
    int i = get_global_id(0), OW = W * fw, OH = H * fh, ow, oh, p, h0, h1, w0, w1;
    float lh, lw, v;
    __global const act_t *xp;
    if (i >= n) return;
    ow = i % OW;
    oh = (i / OW) % OH;
    p = i / (OW * OH);
    xp = x + x_off + (size_t)p * H * W;
    nncl_upsample_src(oh, fh, H, mode, &h0, &h1, &lh);
    nncl_upsample_src(ow, fw, W, mode, &w0, &w1, &lw);
    v = (1.0f - lh) * ((1.0f - lw) * NNCL_LDG(xp, h0 * W + w0) + lw * NNCL_LDG(xp, h0 * W + w1)) +
        lh * ((1.0f - lw) * NNCL_LDG(xp, h1 * W + w0) + lw * NNCL_LDG(xp, h1 * W + w1));
    NNCL_ST(v, y, y_off + i);
}

/* The weight output o along an axis gives input i (0 if none). */
float nncl_upsample_w(int o, int f, int in, int mode, int i) {
    int i0, i1;
    float l1, w = 0.0f;
    nncl_upsample_src(o, f, in, mode, &i0, &i1, &l1);
    if (i0 == i) w += 1.0f - l1;
    if (i1 == i) w += l1;
    return w;
}

/* One work-item per input element, gathering the outputs that read it:
 * nearest, its f*f block; bilinear, rows and columns within one input of
 * it (those from (i - 1) f to (i + 2) f - 1). No atomics. */
__kernel void nncl_upsample2d_backward_f32(__global const act_t *dy, int dy_off, __global act_t *dx, int dx_off, int H,
                                           int W, int fh, int fw, int mode, int n, int acc) {
    int i = get_global_id(0), OW = W * fw, OH = H * fh, iw, ih, p, oh, ow, oh0, oh1, ow0, ow1;
    float s = 0.0f;
    __global const act_t *gp;
    if (i >= n) return;
    iw = i % W;
    ih = (i / W) % H;
    p = i / (W * H);
    gp = dy + dy_off + (size_t)p * OH * OW;
    oh0 = mode ? max((ih - 1) * fh, 0) : ih * fh;
    oh1 = mode ? min((ih + 2) * fh, OH) : (ih + 1) * fh;
    ow0 = mode ? max((iw - 1) * fw, 0) : iw * fw;
    ow1 = mode ? min((iw + 2) * fw, OW) : (iw + 1) * fw;
    for (oh = oh0; oh < oh1; oh++) {
        float wh = nncl_upsample_w(oh, fh, H, mode, ih);
        if (wh == 0.0f) continue;
        for (ow = ow0; ow < ow1; ow++) {
            float ww = nncl_upsample_w(ow, fw, W, mode, iw);
            if (ww != 0.0f) s += wh * ww * NNCL_LDG(gp, oh * OW + ow);
        }
    }
    if (acc) s += NNCL_LD(dx, dx_off + i);
    NNCL_ST(s, dx, dx_off + i);
}
