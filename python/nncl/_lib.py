"""Finding and loading libnncl.so, and the ctypes mirror of include/nncl.h:
its structs (field for field, in the header's order) and the prototype of
every public function. Nothing here is meant to be used from outside the
package; python/tests/test_api.py checks the mirror against the header."""
import ctypes
import ctypes.util
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int64, c_long, c_size_t,
                    c_uint32, c_uint64, c_void_p)

# ------------------------------------------------------------------ loading


class LibraryNotFoundError(ImportError):
    """libnncl.so could not be loaded; the message lists every place tried and why each failed."""


def _candidates():
    """(description, path) pairs to try in order."""
    env = os.environ.get("NNCL_LIBRARY")
    if env:  # named explicitly: that one only, so a wrong name is not hidden by another copy
        return [("NNCL_LIBRARY", env)]
    out = []
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))  # the repository, when run from python/nncl in the source tree
    if os.path.isfile(os.path.join(top, "include", "nncl.h")):
        out.append(("the source tree's build (make)", os.path.join(top, "build", "libnncl.so")))
    out.append(("the ldconfig cache", ctypes.util.find_library("nncl")))
    out.append(("the dynamic loader's search path (LD_LIBRARY_PATH, system folders)", "libnncl.so.0"))
    for prefix in ("/usr/local", "/usr"):  # make install's default PREFIX, and a distribution's
        out.append(("make install (PREFIX=%s)" % prefix, os.path.join(prefix, "lib", "libnncl.so.0")))
    return out


def _load():
    tried = []
    for what, path in _candidates():
        if path is None:
            tried.append("  %s: no libnncl in it" % what)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            msg = str(e)
            msg = msg[len(path) + 2:] if msg.startswith(path + ": ") else msg
            tried.append("  %s: %s: %s" % (what, path, msg))
    raise LibraryNotFoundError(
        "nncl: libnncl.so not found. Tried:\n" + "\n".join(tried) +
        "\nBuild it with `make lib` in the nncl source folder, install it with `make install`, "
        "or name it with NNCL_LIBRARY=/path/to/libnncl.so.")


lib, path = _load()

# ------------------------------------------------------------------ structs

NNCL_MAX_DIMS = 4
NNCL_IDX_MAX_DIMS = 8
NNCL_ST_MAX_DIMS = 8
NNCL_PROFILE_NAME = 48

LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)
ON_STEP_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, c_int, c_float)


class DeviceInfoC(Structure):
    _fields_ = [("index", c_int), ("platform_index", c_int), ("platform", c_char * 96), ("vendor", c_char * 96),
                ("name", c_char * 128), ("driver", c_char * 64), ("cl_version", c_char * 64),
                ("pci_bus_id", c_char * 32), ("type", c_int), ("compute_units", c_int), ("clock_mhz", c_int),
                ("global_mem", c_uint64), ("max_alloc", c_uint64), ("local_mem", c_uint64), ("fp16", c_int),
                ("fp64", c_int)]


class Config(Structure):
    _fields_ = [("devices", c_char_p), ("kernel_dir", c_char_p), ("log", LOG_FN), ("log_user", c_void_p),
                ("log_level", c_int), ("profiling", c_int), ("binary_cache", c_int), ("gemm_tune", c_int),
                ("memory_cap", c_uint64)]


class ProfileReportC(Structure):
    _fields_ = [("launches", c_int), ("kernel_seconds", c_double), ("span_seconds", c_double), ("plausible", c_int)]


class ProfileKernelC(Structure):
    _fields_ = [("name", c_char * NNCL_PROFILE_NAME), ("launches", c_int), ("seconds", c_double)]


class OptimConfig(Structure):
    _fields_ = [("kind", c_int), ("lr", c_float), ("momentum", c_float), ("nesterov", c_int), ("dampening", c_float),
                ("weight_decay", c_float), ("beta1", c_float), ("beta2", c_float), ("eps", c_float),
                ("alpha", c_float), ("schedule", c_int), ("step_size", c_int), ("gamma", c_float),
                ("total_steps", c_int), ("min_lr", c_float), ("warmup_steps", c_int), ("clip_norm", c_float)]


class TrainConfig(Structure):
    _fields_ = [("max_batch", c_int), ("optim", OptimConfig), ("devices", POINTER(c_int)), ("n_devices", c_int),
                ("shares", POINTER(c_float)), ("rebalance_every", c_int), ("overlap", c_int), ("precision", c_int),
                ("loss_scaling", c_int), ("loss_scale_init", c_float), ("loss_scale_growth_interval", c_int),
                ("checkpoint", c_int), ("pipeline", c_int), ("micro_batches", c_int), ("cuts", POINTER(c_char_p)),
                ("pipe_schedule", c_int), ("arrangement", c_int)]


class OpenCLC(Structure):
    _fields_ = [("platform", c_void_p), ("device", c_void_p), ("context", c_void_p), ("queue", c_void_p)]


class Conv2dOptions(Structure):
    _fields_ = [(n, c_int) for n in ("kernel_h", "kernel_w", "stride_h", "stride_w", "padding_h", "padding_w",
                                     "dilation_h", "dilation_w", "groups", "bias", "act")]


class Conv1dOptions(Structure):
    _fields_ = [(n, c_int) for n in ("kernel", "stride", "padding", "dilation", "groups", "bias", "act")]


class ConvTranspose2dOptions(Structure):
    _fields_ = [(n, c_int) for n in ("kernel_h", "kernel_w", "stride_h", "stride_w", "padding_h", "padding_w",
                                     "output_padding_h", "output_padding_w", "groups", "bias", "act")]


class BatchFitC(Structure):
    _fields_ = [("batch", c_int), ("device", c_int), ("need_bytes", c_uint64), ("have_bytes", c_uint64),
                ("segments", c_int), ("activation_bytes", c_uint64)]


class StageInfoC(Structure):
    _fields_ = [("device", c_int), ("first", c_char * 64), ("last", c_char * 64), ("params", c_size_t),
                ("busy_seconds", c_double), ("idle_seconds", c_double), ("transfer_seconds", c_double),
                ("held_micro_batches", c_int), ("held_bytes", c_size_t), ("arenas", c_int), ("recomputed", c_int)]


class Feed(Structure):
    _fields_ = [("node", c_void_p), ("data", c_void_p)]


class StepInfoC(Structure):
    _fields_ = [("loss", c_float), ("skipped", c_int), ("n_devices", c_int), ("failed_device", c_int),
                ("exchange_seconds", c_double), ("seconds", c_double), ("loss_scale", c_float), ("overflow", c_int),
                ("arrangement", c_int), ("arrangement_why", c_char * 128)]


class Idx(Structure):
    _fields_ = [("type", c_int), ("ndim", c_int), ("dims", c_uint32 * NNCL_IDX_MAX_DIMS), ("count", c_size_t),
                ("data", POINTER(c_float))]


class CsvOptions(Structure):
    _fields_ = [("label", c_char_p), ("label_index", c_int), ("delimiter", c_char), ("label_mode", c_int),
                ("classes", POINTER(c_char_p)), ("n_classes", c_int)]


class Csv(Structure):
    _fields_ = [("rows", c_size_t), ("cols", c_size_t), ("features", POINTER(c_float)), ("labels", POINTER(c_float)),
                ("feature_names", POINTER(c_char_p)), ("label_name", c_char_p), ("label_column", c_int),
                ("n_classes", c_int), ("class_names", POINTER(c_char_p))]


class StEntry(Structure):
    _fields_ = [("name", c_char_p), ("ndim", c_int), ("shape", c_int64 * NNCL_ST_MAX_DIMS), ("data", c_void_p),
                ("numel", c_size_t), ("dtype", c_char * 8)]


class ModelMeta(Structure):
    _fields_ = [("input", c_void_p), ("output", c_void_p), ("scale", c_float), ("shift", c_float),
                ("mean", POINTER(c_float)), ("std", POINTER(c_float)), ("class_names", POINTER(c_char_p)),
                ("n_classes", c_int), ("label_name", c_char_p), ("dtype", c_int)]


class CurveRow(Structure):
    _fields_ = [("epoch", c_int), ("train_loss", c_double), ("train_acc", c_double), ("val_loss", c_double),
                ("val_acc", c_double), ("seconds", c_double), ("samples_per_s", c_double)]


class FitResultC(Structure):
    _fields_ = [("epochs_done", c_int), ("best_epoch", c_int), ("best_val_loss", c_double),
                ("stopped_early", c_int), ("interrupted", c_int), ("restored_best", c_int),
                ("resumed_epoch", c_int), ("resumed_step", c_int), ("train_samples", c_size_t),
                ("val_samples", c_size_t)]


class Augment(Structure):
    _fields_ = [(n, c_int) for n in ("channels", "height", "width", "shift", "flip_horizontal")]


class FitConfig(Structure):
    _fields_ = [("epochs", c_int), ("batch", c_int), ("seed", c_uint64), ("x", c_void_p), ("labels", c_void_p),
                ("logits", c_void_p), ("val", c_void_p), ("progress", c_void_p), ("curve", c_void_p),
                ("val_fraction", c_double), ("patience", c_int), ("keep_best", c_int), ("checkpoint", c_char_p),
                ("checkpoint_every", c_int), ("resume", c_char_p), ("on_step", ON_STEP_FN), ("user", c_void_p),
                ("result", POINTER(FitResultC)), ("augment", Augment)]


# C name -> the ctypes mirror (the layout test compiles offsetof() of each field)
STRUCTS = {"nncl_device_info": DeviceInfoC, "nncl_config": Config, "nncl_profile_report": ProfileReportC,
           "nncl_profile_kernel": ProfileKernelC, "nncl_optim_config": OptimConfig, "nncl_train_config": TrainConfig,
           "nncl_feed": Feed, "nncl_step_info": StepInfoC, "nncl_idx": Idx, "nncl_csv_options": CsvOptions,
           "nncl_csv": Csv, "nncl_safetensors_entry": StEntry, "nncl_model_meta": ModelMeta,
           "nncl_curve_row": CurveRow, "nncl_fit_result": FitResultC, "nncl_fit_config": FitConfig,
           "nncl_augment": Augment,
           "nncl_opencl": OpenCLC, "nncl_conv2d_options": Conv2dOptions, "nncl_conv1d_options": Conv1dOptions,
           "nncl_conv_transpose2d_options": ConvTranspose2dOptions, "nncl_batch_fit": BatchFitC,
           "nncl_stage_info": StageInfoC}

# ------------------------------------------------------------------ functions

P = c_void_p
PP = POINTER(c_void_p)
I = c_int
S = c_int  # nncl_status
F = c_float
D = c_double
Z = c_size_t
IP = POINTER(c_int)
FP = c_void_p  # float arrays: passed as addresses (NumPy data pointers)
CP = c_char_p

# name: (restype, argtypes); builders that create nodes are declared by
# graph.py from its own table, also those only newer libraries have
PROTOS = {
    "nncl_status_str": (CP, [I]),
    "nncl_last_error": (CP, [P]),
    "nncl_devices_list": (S, [POINTER(DeviceInfoC), I, IP]),
    "nncl_config_default": (Config, []),
    "nncl_init": (S, [POINTER(Config), PP]),
    "nncl_free": (None, [P]),
    "nncl_device_count": (I, [P]),
    "nncl_device_info_get": (S, [P, I, POINTER(DeviceInfoC)]),
    "nncl_finish": (S, [P, I]),
    "nncl_device_memory": (S, [P, I, POINTER(c_uint64), POINTER(c_uint64)]),
    "nncl_tune_gemm": (S, [P, I, D]),
    "nncl_profile_start": (S, [P, I]),
    "nncl_profile_stop": (S, [P, I, POINTER(ProfileReportC)]),
    "nncl_profile_kernels": (I, [P, I, POINTER(ProfileKernelC), I]),
    "nncl_tensor_create": (S, [P, I, I, IP, PP]),
    "nncl_tensor_free": (None, [P]),
    "nncl_tensor_ndim": (I, [P]),
    "nncl_tensor_dim": (I, [P, I]),
    "nncl_tensor_numel": (Z, [P]),
    "nncl_tensor_device": (I, [P]),
    "nncl_tensor_write": (S, [P, FP, Z]),
    "nncl_tensor_read": (S, [P, FP, Z]),
    "nncl_tensor_write_async": (S, [P, FP, Z, PP]),
    "nncl_tensor_read_async": (S, [P, FP, Z, PP]),
    "nncl_event_wait": (S, [P]),
    "nncl_event_free": (None, [P]),
    "nncl_tensor_copy": (S, [P, P]),
    "nncl_add": (S, [P, P, P, P]),
    "nncl_sub": (S, [P, P, P, P]),
    "nncl_mul": (S, [P, P, P, P]),
    "nncl_scale": (S, [P, P, F, P]),
    "nncl_relu": (S, [P, P, P]),
    "nncl_sigmoid": (S, [P, P, P]),
    "nncl_tanh": (S, [P, P, P]),
    "nncl_gelu": (S, [P, P, P]),
    "nncl_softmax": (S, [P, P, P]),
    "nncl_log_softmax": (S, [P, P, P]),
    "nncl_sum": (S, [P, P, I, P]),
    "nncl_mean": (S, [P, P, I, P]),
    "nncl_gemm": (S, [P, I, I, F, P, P, F, P]),
    "nncl_graph_create": (P, [P, c_uint64]),
    "nncl_graph_free": (None, [P]),
    "nncl_param_freeze": (S, [P, P, I]),
    "nncl_graph_find": (P, [P, CP]),
    "nncl_node_shape": (I, [P, IP]),
    "nncl_optim_default": (OptimConfig, [I]),
    "nncl_optim_lr": (F, [POINTER(OptimConfig), c_int64]),
    "nncl_train_default": (TrainConfig, []),
    "nncl_trainer_create": (S, [P, P, P, POINTER(TrainConfig), PP]),
    "nncl_trainer_free": (None, [P]),
    "nncl_trainer_step": (S, [P, POINTER(Feed), I, I, POINTER(StepInfoC)]),
    "nncl_trainer_predict": (S, [P, POINTER(Feed), I, I, P, FP]),
    "nncl_trainer_evaluate": (S, [P, P, P, P, FP, FP, I, POINTER(F), POINTER(F)]),
    "nncl_trainer_shards": (I, [P, IP, I]),
    "nncl_trainer_step_count": (c_int64, [P]),
    "nncl_trainer_param_get": (S, [P, CP, FP, Z]),
    "nncl_trainer_param_set": (S, [P, CP, FP, Z]),
    "nncl_trainer_save": (S, [P, CP]),
    "nncl_trainer_load": (S, [P, CP]),
    "nncl_trainer_save_checkpoint": (S, [P, CP]),
    "nncl_trainer_load_checkpoint": (S, [P, CP]),
    "nncl_idx_parse": (S, [c_void_p, Z, CP, POINTER(Idx)]),
    "nncl_idx_load": (S, [CP, POINTER(Idx)]),
    "nncl_idx_free": (None, [POINTER(Idx)]),
    "nncl_csv_options_default": (CsvOptions, []),
    "nncl_csv_parse": (S, [c_void_p, Z, CP, POINTER(CsvOptions), POINTER(Csv)]),
    "nncl_csv_load": (S, [CP, POINTER(CsvOptions), POINTER(Csv)]),
    "nncl_csv_free": (None, [POINTER(Csv)]),
    "nncl_dataset_create": (S, [Z, I, IP, FP, FP, I, PP]),
    "nncl_dataset_from_idx": (S, [POINTER(Idx), POINTER(Idx), PP]),
    "nncl_dataset_load_idx": (S, [CP, CP, PP]),
    "nncl_dataset_from_csv": (S, [POINTER(Csv), PP]),
    "nncl_dataset_load_csv": (S, [CP, POINTER(CsvOptions), PP]),
    "nncl_dataset_free": (None, [P]),
    "nncl_dataset_size": (Z, [P]),
    "nncl_dataset_features": (Z, [P]),
    "nncl_dataset_classes": (I, [P]),
    "nncl_dataset_shape": (I, [P, IP]),
    "nncl_dataset_class_name": (CP, [P, I]),
    "nncl_dataset_x": (c_void_p, [P]),
    "nncl_dataset_y": (c_void_p, [P]),
    "nncl_dataset_batch": (S, [P, Z, Z, PP, PP]),
    "nncl_dataset_gather": (S, [P, c_void_p, Z, FP, FP]),
    "nncl_dataset_permutation": (S, [Z, c_uint64, c_void_p]),
    "nncl_dataset_shuffle": (S, [P, c_uint64]),
    "nncl_dataset_subset": (S, [P, c_void_p, Z, PP]),
    "nncl_dataset_split": (S, [P, D, c_uint64, PP, PP]),
    "nncl_dataset_stats": (S, [P, FP, FP]),
    "nncl_dataset_standardize": (S, [P, FP, FP]),
    "nncl_dataset_scale": (S, [P, F, F]),
    "nncl_loader_create": (S, [P, Z, c_uint64, I, PP]),
    "nncl_loader_next": (S, [P, PP, PP, IP]),
    "nncl_loader_reset": (S, [P, I]),
    "nncl_loader_set_augment": (S, [P, POINTER(Augment)]),
    "nncl_loader_batches": (Z, [P]),
    "nncl_loader_epoch": (I, [P]),
    "nncl_loader_free": (None, [P]),
    "nncl_safetensors_load": (S, [CP, PP]),
    "nncl_safetensors_parse": (S, [c_void_p, Z, CP, PP]),
    "nncl_safetensors_free": (None, [P]),
    "nncl_safetensors_count": (I, [P]),
    "nncl_safetensors_get": (S, [P, I, POINTER(StEntry)]),
    "nncl_safetensors_find": (I, [P, CP]),
    "nncl_safetensors_expect": (S, [P, CP, I, POINTER(c_int64), PP]),
    "nncl_safetensors_meta": (CP, [P, CP]),
    "nncl_safetensors_meta_count": (I, [P]),
    "nncl_safetensors_meta_at": (S, [P, I, POINTER(CP), POINTER(CP)]),
    "nncl_safetensors_save": (S, [CP, POINTER(StEntry), I, POINTER(CP)]),
    "nncl_graph_from_safetensors": (S, [P, P, PP]),
    "nncl_model_meta_default": (ModelMeta, []),
    "nncl_trainer_save_model": (S, [P, CP, POINTER(ModelMeta)]),
    "nncl_model_load": (S, [P, CP, I, PP]),
    "nncl_model_from_safetensors": (S, [P, P, I, PP]),
    "nncl_model_free": (None, [P]),
    "nncl_model_graph": (P, [P]),
    "nncl_model_trainer": (P, [P]),
    "nncl_model_features": (Z, [P]),
    "nncl_model_input_shape": (I, [P, IP]),
    "nncl_model_classes": (I, [P]),
    "nncl_model_class_name": (CP, [P, I]),
    "nncl_model_label_name": (CP, [P]),
    "nncl_model_preprocess": (S, [P, FP, Z]),
    "nncl_model_predict": (S, [P, FP, Z, FP, c_void_p]),
    "nncl_progress_create": (S, [P, I, I, PP]),
    "nncl_progress_free": (None, [P]),
    "nncl_progress_set_mode": (None, [P, I]),
    "nncl_progress_set_interval": (None, [P, D]),
    "nncl_progress_set_extra": (None, [P, CP]),
    "nncl_progress_update": (None, [P, I, I, D, D, c_long]),
    "nncl_progress_epoch_end": (None, [P, I, D, D, D, D]),
    "nncl_progress_message": (None, [P, CP]),
    "nncl_curve_create": (S, [PP]),
    "nncl_curve_free": (None, [P]),
    "nncl_curve_add": (S, [P, POINTER(CurveRow)]),
    "nncl_curve_count": (I, [P]),
    "nncl_curve_get": (S, [P, I, POINTER(CurveRow)]),
    "nncl_curve_write_csv": (S, [P, CP]),
    "nncl_curve_write_svg": (S, [P, CP, CP]),
    "nncl_svg_bar_chart": (S, [CP, CP, CP, POINTER(CP), POINTER(D), I]),
    "nncl_svg_bar_panels": (S, [CP, CP, CP, I, POINTER(CP), IP, POINTER(CP), POINTER(D)]),
    "nncl_fit_default": (FitConfig, []),
    "nncl_trainer_fit": (S, [P, P, POINTER(FitConfig)]),
    "nncl_trainer_evaluate_dataset": (S, [P, POINTER(FitConfig), P, POINTER(F), POINTER(F)]),
    "nncl_trainer_summary": (S, [P, P]),
    "nncl_graph_summary": (S, [P, P]),
    "nncl_device_opencl": (S, [P, I, POINTER(OpenCLC)]),
    "nncl_tensor_opencl": (c_void_p, [P]),
    "nncl_tensor_write_half": (S, [P, I, FP, Z]),
    "nncl_kernel_family": (CP, [I]),
    "nncl_kernel_program": (S, [P, I, CP, PP]),
    "nncl_gemm_variant_count": (I, [P, I]),
    "nncl_gemm_variant_name": (CP, [P, I, I]),
    "nncl_gemm_variant_takes": (I, [P, I, I, I, I]),
    "nncl_gemm_variant_run": (S, [P, I, I, I, I, I, I, P, P, P]),
    "nncl_gemm_half": (S, [P, I, I, I, I, I, I, P, P, P]),
    "nncl_gemm_chosen": (CP, [P, I, I, I, I, I, I]),
    "nncl_gemm_tuned": (I, [P, I]),
    "nncl_conv2d_default": (Conv2dOptions, []),
    "nncl_conv1d_default": (Conv1dOptions, []),
    "nncl_conv_transpose2d_default": (ConvTranspose2dOptions, []),
    "nncl_conv2d_ex": (P, [P, P, I, POINTER(Conv2dOptions), CP]),
    "nncl_conv1d": (P, [P, P, I, POINTER(Conv1dOptions), CP]),
    "nncl_conv_transpose2d": (P, [P, P, I, POINTER(ConvTranspose2dOptions), CP]),
    "nncl_train_max_batch": (S, [P, P, P, POINTER(TrainConfig), I, POINTER(BatchFitC)]),
    "nncl_trainer_stage_device": (I, [P, CP]),
    "nncl_trainer_stages": (I, [P, POINTER(StageInfoC), I]),
    "nncl_model_input": (P, [P]),
    "nncl_model_output": (P, [P]),
}


def declare(name, restype, argtypes):
    """The function name of the library with its prototype, or None when this library lacks it."""
    fn = getattr(lib, name, None)
    if fn is None:
        return None
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


missing = [n for n, (r, a) in PROTOS.items() if declare(n, r, a) is None]
if missing:
    raise ImportError("nncl: %s lacks %s: it is older than this package (rebuild it with `make lib`)"
                      % (path, ", ".join(missing)))

# the C library's stdio, for the FILE * of progress output and summaries
libc = ctypes.CDLL(None)
libc.fdopen.restype = c_void_p
libc.fdopen.argtypes = [c_int, c_char_p]
libc.fopen.restype = c_void_p
libc.fopen.argtypes = [c_char_p, c_char_p]
libc.fflush.argtypes = [c_void_p]
libc.fclose.argtypes = [c_void_p]
