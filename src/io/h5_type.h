/* h5_type.h — one name for any HDF5 datatype, as people read it.
 *
 * The loader's errors, `inspect` and `compare` all name a dataset's type;
 * they share this one namer (h5_util.c) so one type never prints two
 * ways: "float32", "uint16be", "float(3 bytes)" (not IEEE binary32/64),
 * "string(16)" (fixed length), "string(variable)", "compound(12 bytes)". */
#ifndef RC_IO_H5_TYPE_H
#define RC_IO_H5_TYPE_H

#include <stddef.h>

#include <hdf5.h>

void rc_h5_type_name(hid_t type, char *buf, size_t cap);

#endif
