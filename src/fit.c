/* fit.c - the epoch loop every classifier example needs: a prefetching
 * loader over the training set, one trainer step per batch with the
 * progress line (loss, accuracy, samples/s, device split), evaluation of
 * the validation set and one curve row per epoch. */
#include "trainer.h"
#include <math.h>
#include <stdio.h>

nncl_fit_config nncl_fit_default(void) {
    nncl_fit_config c;
    memset(&c, 0, sizeof c);
    c.epochs = 10;
    c.batch = 100;
    c.seed = 1;
    return c;
}

/* A dataset's samples against the model's input and labels, before any of
 * its memory is read as a batch: a sample of another size would be read
 * past the dataset's (or the loader's) buffer. The input may take the
 * samples flat ([784] for [1,28,28] images): the element counts decide. */
static nncl_status fit_check_dataset(nncl_trainer *t, const nncl_fit_config *cfg, const nncl_dataset *ds,
                                     const char *fn) {
    int shape[8], nd = nncl_dataset_shape(ds, shape), k;
    char have[96], want[96];
    size_t used = 0;
    if (!cfg->x || !cfg->labels) return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "%s: x and labels are needed", fn);
    if (nncl_dataset_features(ds) == cfg->x->sample_numel && cfg->labels->sample_numel == 1) return NNCL_OK;
    have[0] = 0;
    for (k = 0; k < nd && k < 8 && used + 16 < sizeof have; k++)
        used += (size_t)snprintf(have + used, sizeof have - used, ",%d", shape[k]);
    if (cfg->labels->sample_numel != 1)
        return nncl__fail(t->ctx, NNCL_ERR_SHAPE, "%s: labels \"%s\" of shape %s, but a dataset holds one label per sample",
                          fn, cfg->labels->name, nncl__shape_str(cfg->labels, want, sizeof want));
    return nncl__fail(t->ctx, NNCL_ERR_SHAPE, "%s: the dataset's samples are [N%s] (%zu values each), input \"%s\" is %s",
                      fn, have, nncl_dataset_features(ds), cfg->x->name, nncl__shape_str(cfg->x, want, sizeof want));
}

nncl_status nncl_trainer_evaluate_dataset(nncl_trainer *t, const nncl_fit_config *cfg, const nncl_dataset *ds,
                                          float *loss, float *accuracy) {
    if (!t || !cfg || !ds)
        return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "evaluate: trainer, config or dataset is NULL");
    NNCL_TRY(fit_check_dataset(t, cfg, ds, "evaluate"));
    return nncl_trainer_evaluate(t, cfg->x, cfg->labels, cfg->logits, nncl_dataset_x(ds), nncl_dataset_y(ds),
                                 (int)nncl_dataset_size(ds), loss, accuracy);
}

/* "shards 60/40" for the progress line. */
static void fit_split_text(nncl_trainer *t, char *buf, size_t len) {
    int sizes[16], n = nncl_trainer_shards(t, sizes, 16), i;
    size_t used;
    buf[0] = 0;
    if (n < 2) return;
    used = (size_t)snprintf(buf, len, "shards ");
    for (i = 0; i < n && i < 16 && used + 8 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "/" : "", t->alive[i] ? sizes[i] : 0);
}

nncl_status nncl_trainer_fit(nncl_trainer *t, const nncl_dataset *train, const nncl_fit_config *cfg) {
    nncl_loader *ld = NULL;
    nncl_status st;
    int epoch;
    if (!t || !train || !cfg)
        return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "fit: trainer, dataset or config is NULL");
    if (!cfg->x || !cfg->labels || !cfg->logits || cfg->epochs <= 0 || cfg->batch <= 0 ||
        cfg->batch > t->cfg.max_batch)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "fit: x, labels, logits, epochs > 0 and batch in 1..%d (max_batch) are needed", t->cfg.max_batch);
    NNCL_TRY(fit_check_dataset(t, cfg, train, "fit"));
    if (cfg->val) NNCL_TRY(fit_check_dataset(t, cfg, cfg->val, "fit (validation set)"));
    st = nncl_loader_create(train, (size_t)cfg->batch, cfg->seed, NNCL_LOADER_SHUFFLE, &ld);
    if (st != NNCL_OK) return nncl__fail(t->ctx, st, "%s", nncl_last_error(NULL));
    for (epoch = 0; epoch < cfg->epochs && st == NNCL_OK; epoch++) {
        double t0 = nncl__seconds(), loss_sum = 0;
        long samples = 0;
        int step = 0;
        nncl_curve_row row;
        char split[96];
        for (;;) {
            const float *x, *y;
            int b;
            nncl_feed f[2];
            nncl_step_info info;
            if ((st = nncl_loader_next(ld, &x, &y, &b)) != NNCL_OK) {
                nncl__fail(t->ctx, st, "%s", nncl_last_error(NULL));
                break;
            }
            if (b == 0) break;
            f[0].node = cfg->x;
            f[0].data = x;
            f[1].node = cfg->labels;
            f[1].data = y;
            if ((st = nncl_trainer_step(t, f, 2, b, &info)) != NNCL_OK) break;
            if (!info.skipped) loss_sum += (double)info.loss * b;
            samples += b;
            if (cfg->progress) {
                fit_split_text(t, split, sizeof split);
                nncl_progress_set_extra(cfg->progress, split[0] ? split : NULL);
                nncl_progress_update(cfg->progress, epoch, step, info.loss, -1, b);
            }
            step++;
        }
        if (st != NNCL_OK) break;
        memset(&row, 0, sizeof row);
        row.epoch = epoch + 1;
        row.seconds = nncl__seconds() - t0;
        row.samples_per_s = samples / (row.seconds > 0 ? row.seconds : 1);
        row.train_loss = samples ? loss_sum / samples : NAN;
        row.train_acc = NAN;
        row.val_loss = row.val_acc = NAN;
        if (cfg->val) {
            float vl, va;
            if ((st = nncl_trainer_evaluate_dataset(t, cfg, cfg->val, &vl, &va)) != NNCL_OK) break;
            row.val_loss = vl;
            row.val_acc = va;
        }
        if (cfg->progress) nncl_progress_epoch_end(cfg->progress, epoch, row.train_loss, -1, row.val_loss, row.val_acc);
        if (cfg->curve && (st = nncl_curve_add(cfg->curve, &row)) != NNCL_OK) nncl__fail(t->ctx, st, "%s", nncl_last_error(NULL));
    }
    nncl_loader_free(ld);
    return st;
}
