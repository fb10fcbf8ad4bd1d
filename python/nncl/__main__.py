"""python -m nncl: the library used and every OpenCL device present, as nncl_devices_list sees them."""
import nncl

print("libnncl: %s" % nncl.library_path)
for d in nncl.devices():
    print("device %s\n    vendor %s, driver %s, %s, fp16 %s, fp64 %s" % (
        d, d.vendor, d.driver, d.cl_version, "yes" if d.fp16 else "no", "yes" if d.fp64 else "no"))
