/* fit.c - the epoch loop every classifier example needs: a prefetching
 * loader over the training set (less a seeded validation part), one trainer
 * step per batch with the progress line (loss, training accuracy,
 * samples/s, device split), validation with early stopping and keep-best
 * after each epoch, one curve row per epoch, and checkpoints that record
 * where the run is so that a resumed run ends bit for bit as an
 * uninterrupted one. */
#include "io/io.h"
#include <math.h>
#include <stdio.h>

#define FIT_MAX_CURVE 1000000 /* rows a checkpoint may carry */

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

/* Where a run is: what a checkpoint records besides the trainer. */
typedef struct fit_state {
    int epoch;                 /* 0-based epoch in progress */
    int batch;                 /* batches done in it */
    double loss_sum;           /* its sample-weighted loss so far */
    long samples, correct;
    double best_loss;          /* lowest validation loss, and its epoch (1-based, 0: none) */
    int best_epoch, bad_epochs;
    float *best_params, *best_state; /* keep_best: that epoch's weights */
    int have_best;
    int *shard_zero;           /* per device: last state shown (0 in, 1 left out, 2 failed) */
    int *failed;               /* per device: a step reported it failed */
    int said_arrangement;      /* the progress says once how the devices were arranged, and why */
} fit_state;

/* "data parallel, shards 60/40" for the progress line, and a message when a device gets no
 * samples or leaves, saying why. */
static void fit_split_text(nncl_trainer *t, fit_state *fs, nncl_progress *pr, char *buf, size_t len) {
    int sizes[16], n = nncl_trainer_shards(t, sizes, 16), i, working = 0;
    size_t used;
    buf[0] = 0;
    if (n < 2) return;
    if (!fs->said_arrangement) { /* the measured figures behind the choice */
        char msg[160];
        snprintf(msg, sizeof msg, "devices arranged: %s", t->why);
        nncl_progress_message(pr, msg);
        fs->said_arrangement = 1;
    }
    for (i = 0; i < n && i < 16; i++) working += t->alive[i] && sizes[i];
    used = (size_t)snprintf(buf, len, "%s, shards ", working > 1 ? "data parallel" : "one device");
    for (i = 0; i < n && i < 16 && used + 8 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "/" : "", t->alive[i] ? sizes[i] : 0);
    for (i = 0; i < n && i < 16 && used + 24 < len; i++) /* why a device has no samples, on the line itself */
        if (!t->alive[i] || !sizes[i])
            used += (size_t)snprintf(buf + used, len - used, " (d%d %s)", t->device[i],
                                     fs->failed[i] ? "failed" : "out: faster without");
    for (i = 0; i < n && i < 16; i++) {
        /* The trainer leaves a device out (alive 0 too) when the others alone
         * are faster; only a step's report says that it failed. */
        int state = !t->alive[i] ? (fs->failed[i] ? 2 : 1) : sizes[i] == 0 ? 1 : 0;
        if (state != fs->shard_zero[i]) {
            nncl_device_info info;
            char msg[256];
            memset(&info, 0, sizeof info);
            nncl_device_info_get(t->ctx, t->device[i], &info);
            if (state == 1)
                snprintf(msg, sizeof msg, "device %d (%.60s, %.40s) left out: the others are faster without it",
                         t->device[i], info.name, info.platform);
            else if (state == 2)
                snprintf(msg, sizeof msg, "device %d (%.60s) failed and left; the others go on", t->device[i], info.name);
            else
                snprintf(msg, sizeof msg, "device %d (%.60s) takes part again", t->device[i], info.name);
            if (state || fs->shard_zero[i]) nncl_progress_message(pr, msg);
            fs->shard_zero[i] = state;
        }
    }
}

/* ------------------------------------------------------------- checkpoints */

/* n numbers, each after a space. */
static void fit_nums(nncl__buf *b, const double *v, int n) {
    int k;
    for (k = 0; k < n; k++) {
        nncl__buf_put(b, " ");
        nncl__buf_num(b, v[k]);
    }
}

/* "NUMBER INT INT" as fit_save writes it; 0 when malformed. */
static int fit_scan3(const char *s, double *x, long *a, long *b) {
    char *e;
    *x = nncl__parse_double(s, &e);
    if (e == s || *e != ' ') return 0;
    s = e + 1;
    *a = strtol(s, &e, 10);
    if (e == s || *e != ' ') return 0;
    s = e + 1;
    *b = strtol(s, &e, 10);
    return e != s && !*e && *a >= 0 && *b >= 0 && *a < 0x7fffffffL && *b < 0x7fffffffL;
}

static nncl_status fit_save(nncl_trainer *t, const nncl_fit_config *cfg, const fit_state *fs, size_t n_train) {
    char epoch[24], batch[24], seed[32], bsize[24], ntrain[32], sums[96], best[64], *curve = NULL;
    const char *meta[24];
    nncl_safetensors_entry extra[2];
    int k = 0, n_extra = 0, rows = cfg->curve ? nncl_curve_count(cfg->curve) : 0, i;
    nncl_status st;
    snprintf(epoch, sizeof epoch, "%d", fs->epoch);
    snprintf(batch, sizeof batch, "%d", fs->batch);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)cfg->seed);
    snprintf(bsize, sizeof bsize, "%d", cfg->batch);
    snprintf(ntrain, sizeof ntrain, "%zu", n_train);
    nncl__fmt_double(sums, 40, "%.17g", fs->loss_sum); /* '.' whatever the locale */
    snprintf(sums + strlen(sums), sizeof sums - strlen(sums), " %ld %ld", fs->samples, fs->correct);
    nncl__fmt_double(best, 40, "%.17g", fs->best_loss);
    snprintf(best + strlen(best), sizeof best - strlen(best), " %d %d", fs->best_epoch, fs->bad_epochs);
    meta[k++] = "nncl.fit.epoch"; meta[k++] = epoch;
    meta[k++] = "nncl.fit.batch"; meta[k++] = batch;
    meta[k++] = "nncl.fit.seed"; meta[k++] = seed;
    meta[k++] = "nncl.fit.batch_size"; meta[k++] = bsize;
    meta[k++] = "nncl.fit.train_samples"; meta[k++] = ntrain;
    meta[k++] = "nncl.fit.sums"; meta[k++] = sums;
    meta[k++] = "nncl.fit.best"; meta[k++] = best;
    if (rows > 0) { /* the curve so far, one row per line, for the resumed run's CSV and plot */
        nncl__buf b;
        memset(&b, 0, sizeof b);
        for (i = 0; i < rows; i++) {
            nncl_curve_row r;
            double v[6];
            nncl_curve_get(cfg->curve, i, &r);
            v[0] = r.train_loss, v[1] = r.train_acc, v[2] = r.val_loss, v[3] = r.val_acc, v[4] = r.seconds;
            v[5] = r.samples_per_s;
            nncl__buf_put(&b, "%s%d", i ? "\n" : "", r.epoch);
            fit_nums(&b, v, 6);
        }
        if (b.failed) {
            NNCL_FREE(b.s);
            return nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "out of host memory");
        }
        curve = b.s;
        meta[k++] = "nncl.fit.curve"; meta[k++] = curve;
    }
    meta[k] = NULL;
    if (fs->have_best) {
        memset(extra, 0, sizeof extra);
        extra[0].name = "nncl.fit.best_params";
        extra[0].ndim = 1;
        extra[0].shape[0] = (int64_t)t->graph->n_params;
        extra[0].data = fs->best_params;
        n_extra = 1;
        if (t->graph->n_state) {
            extra[1] = extra[0];
            extra[1].name = "nncl.fit.best_state";
            extra[1].shape[0] = (int64_t)t->graph->n_state;
            extra[1].data = fs->best_state;
            n_extra = 2;
        }
    }
    st = nncl__trainer_save_ex(t, cfg->checkpoint, 1, NNCL_PRECISION_FP32, meta, extra, n_extra);
    NNCL_FREE(curve);
    return st;
}

static int fit_meta_long(const nncl_safetensors *st, const char *key, long lo, long hi, long *out) {
    const char *v = nncl_safetensors_meta(st, key);
    char *end;
    if (!v) return 0;
    *out = strtol(v, &end, 10);
    return end != v && !*end && *out >= lo && *out <= hi;
}

/* Reads a checkpoint of this run into the trainer and fs; the curve rows it
 * carries go to cfg->curve. */
static nncl_status fit_resume(nncl_trainer *t, const nncl_fit_config *cfg, fit_state *fs, size_t n_train,
                              size_t n_batches) {
    nncl_safetensors *st = NULL;
    nncl_status s;
    long epoch, batch, bsize, ntrain, be = 0, bad = 0;
    const char *seed, *sums, *best, *curve;
    char *end;
    if ((s = nncl_safetensors_load(cfg->resume, &st)) != NNCL_OK) return nncl__fail(t->ctx, s, "resume: %s", nncl_last_error(NULL));
    seed = nncl_safetensors_meta(st, "nncl.fit.seed");
    sums = nncl_safetensors_meta(st, "nncl.fit.sums");
    best = nncl_safetensors_meta(st, "nncl.fit.best");
    if (!fit_meta_long(st, "nncl.fit.epoch", 0, 1000000000L, &epoch) || !fit_meta_long(st, "nncl.fit.batch", 0, (long)n_batches, &batch) ||
        !fit_meta_long(st, "nncl.fit.batch_size", 1, 1000000000L, &bsize) ||
        !fit_meta_long(st, "nncl.fit.train_samples", 1, 0x7fffffffL, &ntrain) || !seed || !sums || !best) {
        s = nncl__fail(t->ctx, NNCL_ERR_FORMAT, "resume: %s is not a checkpoint written by nncl_trainer_fit (no valid nncl.fit.* metadata)",
                       cfg->resume);
    } else if (strtoull(seed, &end, 10) != cfg->seed || *end || bsize != cfg->batch || (size_t)ntrain != n_train) {
        s = nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                       "resume: %s is of another run (seed %s, batch %ld, %ld training samples; this run: seed %llu, batch %d, %zu)",
                       cfg->resume, seed, bsize, ntrain, (unsigned long long)cfg->seed, cfg->batch, n_train);
    } else if (epoch > cfg->epochs || (epoch == cfg->epochs && batch > 0)) {
        s = nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                       "resume: %s has %ld epochs done and %ld steps of the next; this run asks for %d epochs",
                       cfg->resume, epoch, batch, cfg->epochs);
    } else if (!fit_scan3(sums, &fs->loss_sum, &fs->samples, &fs->correct) || !fit_scan3(best, &fs->best_loss, &be, &bad)) {
        s = nncl__fail(t->ctx, NNCL_ERR_FORMAT, "resume: %s: malformed nncl.fit.sums or nncl.fit.best", cfg->resume);
    }
    fs->best_epoch = (int)be;
    fs->bad_epochs = (int)bad;
    if (s == NNCL_OK && fs->best_params && nncl_safetensors_find(st, "nncl.fit.best_params") >= 0) {
        const float *d;
        int64_t np = (int64_t)t->graph->n_params, ns = (int64_t)t->graph->n_state;
        s = nncl_safetensors_expect(st, "nncl.fit.best_params", 1, &np, &d);
        if (s == NNCL_OK) memcpy(fs->best_params, d, t->graph->n_params * sizeof(float));
        if (s == NNCL_OK && ns) {
            s = nncl_safetensors_expect(st, "nncl.fit.best_state", 1, &ns, &d);
            if (s == NNCL_OK) memcpy(fs->best_state, d, t->graph->n_state * sizeof(float));
        }
        if (s != NNCL_OK) nncl__fail(t->ctx, s, "resume: %s", nncl_last_error(NULL));
        else fs->have_best = 1;
    }
    if (s == NNCL_OK) s = nncl__trainer_load_from(t, st, cfg->resume, 1);
    if (s == NNCL_OK && cfg->curve && (curve = nncl_safetensors_meta(st, "nncl.fit.curve")) != NULL) {
        int rows = 0;
        while (*curve && rows++ < FIT_MAX_CURVE && s == NNCL_OK) {
            nncl_curve_row r;
            double v[6];
            char *e;
            int k;
            memset(&r, 0, sizeof r);
            r.epoch = (int)strtol(curve, &e, 10);
            for (k = 0; k < 6 && e != curve && *e == ' '; k++) v[k] = nncl__parse_double(curve = e + 1, &e);
            if (k < 6 || e == curve || (*e && *e != '\n')) break; /* a convenience: a malformed curve is dropped */
            r.train_loss = v[0], r.train_acc = v[1], r.val_loss = v[2], r.val_acc = v[3], r.seconds = v[4];
            r.samples_per_s = v[5];
            s = nncl_curve_add(cfg->curve, &r);
            curve = *e ? e + 1 : e;
        }
    }
    if (s == NNCL_OK) {
        fs->epoch = (int)epoch;
        fs->batch = (int)batch;
    }
    nncl_safetensors_free(st);
    return s;
}

/* ------------------------------------------------------------- the loop */

static long fit_correct(const float *logits, const float *y, int b, int C) {
    long correct = 0;
    int r, c;
    for (r = 0; r < b; r++) {
        const float *z = logits + (size_t)r * C;
        int arg = 0;
        for (c = 1; c < C; c++)
            if (z[c] > z[arg]) arg = c;
        correct += arg == (int)y[r];
    }
    return correct;
}

static nncl_status fit_run(nncl_trainer *t, const nncl_dataset *train, const nncl_dataset *val,
                           const nncl_fit_config *cfg, fit_state *fs, nncl_fit_result *res, float *watch) {
    nncl_loader *ld = NULL;
    nncl_status st;
    size_t n_train = nncl_dataset_size(train);
    int C = cfg->logits->shape[1], stop = 0;
    nncl_augment aug = cfg->augment;
    st = nncl_loader_create(train, (size_t)cfg->batch, cfg->seed, NNCL_LOADER_SHUFFLE, &ld);
    if (st != NNCL_OK) return nncl__fail(t->ctx, st, "%s", nncl_last_error(NULL));
    if ((aug.shift || aug.flip_horizontal) && !aug.channels && !aug.height && !aug.width && cfg->x->ndim == 4) {
        aug.channels = cfg->x->shape[1];
        aug.height = cfg->x->shape[2];
        aug.width = cfg->x->shape[3];
    }
    if ((st = nncl_loader_set_augment(ld, &aug)) != NNCL_OK) {
        nncl_loader_free(ld);
        return nncl__fail(t->ctx, st, "fit: augment of x %s: %s", cfg->x->name, nncl_last_error(NULL));
    }
    if (cfg->resume) {
        if ((st = fit_resume(t, cfg, fs, n_train, nncl_loader_batches(ld))) != NNCL_OK) {
            nncl_loader_free(ld);
            return st;
        }
        res->resumed_epoch = fs->epoch + 1;
        res->resumed_step = fs->batch;
        if (cfg->progress) {
            char msg[160];
            snprintf(msg, sizeof msg, "resuming from %.100s at epoch %d, step %d", cfg->resume, fs->epoch + 1, fs->batch);
            nncl_progress_message(cfg->progress, msg);
        }
        if (cfg->patience > 0 && fs->bad_epochs >= cfg->patience) stop = res->stopped_early = 1;
    }
    if (fs->epoch > 0 || fs->batch > 0) st = nncl_loader_reset(ld, fs->epoch);
    for (; fs->epoch < cfg->epochs && st == NNCL_OK && !stop; fs->epoch++, fs->batch = 0) {
        double t0 = nncl__seconds();
        int step;
        long epoch_samples = 0;
        nncl_curve_row row;
        char split[96];
        for (step = 0; st == NNCL_OK; step++) {
            const float *x, *y;
            int b;
            nncl_feed f[2];
            nncl_step_info info;
            if ((st = nncl_loader_next(ld, &x, &y, &b)) != NNCL_OK) {
                nncl__fail(t->ctx, st, "%s", nncl_last_error(NULL));
                break;
            }
            if (b == 0) break;
            if (step < fs->batch) continue; /* resumed: batches done before the checkpoint */
            f[0].node = cfg->x;
            f[0].data = x;
            f[1].node = cfg->labels;
            f[1].data = y;
            if ((st = nncl_trainer_step(t, f, 2, b, &info)) != NNCL_OK) break;
            if (info.failed_device >= 0) {
                int k;
                for (k = 0; k < t->nd; k++)
                    if (t->device[k] == info.failed_device) fs->failed[k] = 1;
            }
            {
                long correct = fit_correct(watch, y, b, C);
                if (!info.skipped) fs->loss_sum += (double)info.loss * b;
                fs->samples += b;
                fs->correct += correct;
                epoch_samples += b;
                fs->batch = step + 1;
                if (cfg->progress) {
                    fit_split_text(t, fs, cfg->progress, split, sizeof split);
                    nncl_progress_set_extra(cfg->progress, split[0] ? split : NULL);
                    nncl_progress_update(cfg->progress, fs->epoch, step, info.loss, (double)correct / b, b);
                }
            }
            if (cfg->checkpoint && cfg->checkpoint_every > 0 && fs->batch % cfg->checkpoint_every == 0 &&
                (size_t)fs->batch < nncl_loader_batches(ld) && (st = fit_save(t, cfg, fs, n_train)) != NNCL_OK)
                break;
            if (cfg->on_step && cfg->on_step(cfg->user, fs->epoch, step, info.loss)) {
                res->interrupted = 1;
                /* unless the periodic one was just written; after an epoch's
                 * last step too: the resumed run then ends that epoch */
                if (cfg->checkpoint && ((size_t)fs->batch == nncl_loader_batches(ld) || !cfg->checkpoint_every ||
                                        fs->batch % cfg->checkpoint_every))
                    st = fit_save(t, cfg, fs, n_train);
                break;
            }
        }
        if (st != NNCL_OK || res->interrupted) break;
        memset(&row, 0, sizeof row);
        row.epoch = fs->epoch + 1;
        row.seconds = nncl__seconds() - t0;
        row.samples_per_s = epoch_samples / (row.seconds > 0 ? row.seconds : 1);
        row.train_loss = fs->samples ? fs->loss_sum / (double)fs->samples : NAN;
        row.train_acc = fs->samples ? (double)fs->correct / (double)fs->samples : NAN;
        row.val_loss = row.val_acc = NAN;
        if (val) {
            float vl, va;
            if ((st = nncl_trainer_evaluate_dataset(t, cfg, val, &vl, &va)) != NNCL_OK) break;
            row.val_loss = vl;
            row.val_acc = va;
            if (vl < fs->best_loss || !fs->best_epoch) {
                fs->best_loss = vl;
                fs->best_epoch = fs->epoch + 1;
                fs->bad_epochs = 0;
                if (fs->best_params) {
                    if ((st = nncl__trainer_download(t, fs->best_params, fs->best_state)) != NNCL_OK) break;
                    fs->have_best = 1;
                }
            } else {
                fs->bad_epochs++;
            }
        }
        if (cfg->progress) nncl_progress_epoch_end(cfg->progress, fs->epoch, row.train_loss, row.train_acc, row.val_loss, row.val_acc);
        if (cfg->curve && (st = nncl_curve_add(cfg->curve, &row)) != NNCL_OK) {
            nncl__fail(t->ctx, st, "%s", nncl_last_error(NULL));
            break;
        }
        res->epochs_done = fs->epoch + 1;
        fs->loss_sum = 0;
        fs->samples = fs->correct = 0;
        if (cfg->patience > 0 && fs->bad_epochs >= cfg->patience) stop = res->stopped_early = 1;
        if (cfg->checkpoint) { /* as the next epoch's start */
            fs->epoch++;
            fs->batch = 0;
            st = fit_save(t, cfg, fs, n_train);
            fs->epoch--;
        }
        if (stop && cfg->progress) {
            char msg[160];
            snprintf(msg, sizeof msg, "early stopping: val_loss has not improved for %d epochs (best %.4f at epoch %d)",
                     fs->bad_epochs, fs->best_loss, fs->best_epoch);
            nncl_progress_message(cfg->progress, msg);
        }
    }
    if (!res->epochs_done && fs->epoch > 0) res->epochs_done = fs->epoch;
    nncl_loader_free(ld);
    return st;
}

static nncl_status fit_all(nncl_trainer *t, const nncl_dataset *train, const nncl_fit_config *cfg) {
    nncl_dataset *own_train = NULL, *own_val = NULL;
    const nncl_dataset *val;
    nncl_fit_result res;
    fit_state fs;
    float *watch = NULL;
    nncl_status st = NNCL_OK;
    if (!t || !train || !cfg)
        return nncl__fail(t ? t->ctx : NULL, NNCL_ERR_INVALID_ARGUMENT, "fit: trainer, dataset or config is NULL");
    if (t->pipe)
        return nncl__fail(t->ctx, NNCL_ERR_UNSUPPORTED, "fit: not on a pipelined trainer (it reads the logits of every "
                          "batch); step it with nncl_trainer_step");
    if (!cfg->x || !cfg->labels || !cfg->logits || cfg->epochs <= 0 || cfg->batch <= 0 ||
        cfg->batch > t->cfg.max_batch || cfg->logits->ndim != 2 || cfg->checkpoint_every < 0 || cfg->patience < 0)
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT,
                          "fit: x, labels, 2-D logits, epochs > 0, batch in 1..%d (max_batch), checkpoint_every and patience >= 0 are needed",
                          t->cfg.max_batch);
    NNCL_TRY(fit_check_dataset(t, cfg, train, "fit"));
    if (cfg->val) NNCL_TRY(fit_check_dataset(t, cfg, cfg->val, "fit (validation set)"));
    if (!(cfg->val_fraction >= 0 && cfg->val_fraction < 1))
        return nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "fit: val_fraction %g is not in [0, 1)", cfg->val_fraction);
    val = cfg->val;
    if (!val && cfg->val_fraction > 0) {
        if ((st = nncl_dataset_split(train, cfg->val_fraction, cfg->seed, &own_train, &own_val)) != NNCL_OK)
            return nncl__fail(t->ctx, st, "fit: validation split: %s", nncl_last_error(NULL));
        train = own_train;
        val = own_val;
    }
    if ((cfg->patience > 0 || cfg->keep_best) && !val)
        st = nncl__fail(t->ctx, NNCL_ERR_INVALID_ARGUMENT, "fit: early stopping and keep_best need validation (val or val_fraction)");
    memset(&res, 0, sizeof res);
    memset(&fs, 0, sizeof fs);
    fs.best_loss = INFINITY;
    res.train_samples = nncl_dataset_size(train);
    res.val_samples = val ? nncl_dataset_size(val) : 0;
    watch = (float *)nncl__calloc((size_t)t->cfg.max_batch * (size_t)cfg->logits->shape[1], sizeof(float));
    fs.shard_zero = (int *)nncl__calloc((size_t)t->nd + 16, sizeof(int));
    fs.failed = (int *)nncl__calloc((size_t)t->nd + 16, sizeof(int));
    if (cfg->keep_best) {
        fs.best_params = (float *)nncl__calloc(t->graph->n_params + 1, sizeof(float));
        fs.best_state = (float *)nncl__calloc(t->graph->n_state + 1, sizeof(float));
    }
    if (st == NNCL_OK && (!watch || !fs.shard_zero || !fs.failed || (cfg->keep_best && (!fs.best_params || !fs.best_state))))
        st = nncl__fail(t->ctx, NNCL_ERR_OUT_OF_MEMORY, "fit: out of host memory");
    if (st == NNCL_OK) {
        t->watch = cfg->logits;
        t->watch_dst = watch;
        st = fit_run(t, train, val, cfg, &fs, &res, watch);
        t->watch = NULL;
        t->watch_dst = NULL;
    }
    res.best_epoch = fs.best_epoch;
    res.best_val_loss = fs.best_epoch ? fs.best_loss : NAN;
    if (st == NNCL_OK && cfg->keep_best && fs.have_best && !res.interrupted && fs.best_epoch != res.epochs_done) {
        st = nncl__trainer_upload(t, fs.best_params, fs.best_state);
        res.restored_best = st == NNCL_OK;
        if (st == NNCL_OK && cfg->progress) {
            char msg[96];
            snprintf(msg, sizeof msg, "restored the weights of epoch %d (lowest val_loss %.4f)", fs.best_epoch, fs.best_loss);
            nncl_progress_message(cfg->progress, msg);
        }
    }
    if (cfg->result) *cfg->result = res;
    NNCL_FREE(watch);
    NNCL_FREE(fs.shard_zero);
    NNCL_FREE(fs.failed);
    NNCL_FREE(fs.best_params);
    NNCL_FREE(fs.best_state);
    nncl_dataset_free(own_train);
    nncl_dataset_free(own_val);
    return st;
}

nncl_status nncl_trainer_fit(nncl_trainer *t, const nncl_dataset *train, const nncl_fit_config *cfg) {
    nncl_status st;
    NNCL__TRAINER_CALL(t, "nncl_trainer_fit", st, fit_all(t, train, cfg));
    return st;
}

#undef FIT_MAX_CURVE
