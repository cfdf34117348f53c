/* TEST-ONLY securec (CANN's libc_sec) functions for the fake libascendcl.so: torchair's core libraries call them (their
 * log and error messages) without linking a library that defines them. Real semantics, compact: a destination
 * too small is an error (EINVAL / ERANGE, the destination emptied where securec empties it), the *printf_s ones
 * return the characters written or -1. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int memcpy_s(void *dest, size_t dest_max, const void *src, size_t count) {
  if (dest == NULL || src == NULL) return EINVAL;
  if (count > dest_max) return ERANGE;
  memmove(dest, src, count);
  return 0;
}

int memmove_s(void *dest, size_t dest_max, const void *src, size_t count) {
  return memcpy_s(dest, dest_max, src, count);
}

int memset_s(void *dest, size_t dest_max, int c, size_t count) {
  if (dest == NULL) return EINVAL;
  memset(dest, c, count > dest_max ? dest_max : count);
  return count > dest_max ? ERANGE : 0;
}

int strncpy_s(char *dest, size_t dest_max, const char *src, size_t count) {
  if (dest == NULL || dest_max == 0) return EINVAL;
  if (src == NULL) {
    dest[0] = '\0';
    return EINVAL;
  }
  size_t n = strnlen(src, count);
  if (n >= dest_max) {
    dest[0] = '\0';
    return ERANGE;
  }
  memcpy(dest, src, n);
  dest[n] = '\0';
  return 0;
}

int strcpy_s(char *dest, size_t dest_max, const char *src) {
  return strncpy_s(dest, dest_max, src, (size_t)-1);
}

int strcat_s(char *dest, size_t dest_max, const char *src) {
  if (dest == NULL || dest_max == 0) return EINVAL;
  size_t used = strnlen(dest, dest_max);
  if (used == dest_max) return EINVAL;
  return strncpy_s(dest + used, dest_max - used, src, (size_t)-1);
}

int vsnprintf_s(char *dest, size_t dest_max, size_t count, const char *format, va_list args) {
  if (dest == NULL || dest_max == 0 || format == NULL) return -1;
  size_t room = count < dest_max ? count + 1 : dest_max;  /* count + 1: count characters and the terminator */
  int n = vsnprintf(dest, room, format, args);
  if (n < 0) {
    dest[0] = '\0';
    return -1;
  }
  if ((size_t)n < room) return n;
  if (count < dest_max) return -1;  /* truncated to count characters, as asked */
  dest[0] = '\0';  /* does not fit the destination: an error */
  return -1;
}

int vsprintf_s(char *dest, size_t dest_max, const char *format, va_list args) {
  return vsnprintf_s(dest, dest_max, dest_max, format, args);
}

int snprintf_s(char *dest, size_t dest_max, size_t count, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf_s(dest, dest_max, count, format, args);
  va_end(args);
  return n;
}

int sprintf_s(char *dest, size_t dest_max, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf_s(dest, dest_max, dest_max, format, args);
  va_end(args);
  return n;
}
