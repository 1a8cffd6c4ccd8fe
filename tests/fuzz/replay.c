/* replay.c - runs a harness over saved inputs without libFuzzer: every
 * file named on the command line, and every file in a directory named
 * there. Prints how many it ran; a crash or failed check aborts. Used by
 * make test, which builds the harnesses with the project's compiler. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

#define REPLAY_MAX_INPUT (1024 * 1024) /* bytes of one saved input */
#define REPLAY_MAX_PATH 4096

static int
replay_file(const char *path, size_t *count)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	size_t n;

	if (f == NULL) {
		perror(path);
		return -1;
	}
	buf = malloc(REPLAY_MAX_INPUT + 1);
	if (buf == NULL) {
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, REPLAY_MAX_INPUT + 1, f);
	fclose(f);
	if (n > REPLAY_MAX_INPUT) {
		fprintf(stderr, "%s: larger than %d bytes\n", path, REPLAY_MAX_INPUT);
		free(buf);
		return -1;
	}
	/* An exact copy, so a read past the input's end is caught. */
	unsigned char *exact = malloc(n ? n : 1);
	if (exact == NULL) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	(*count)++;
	return 0;
}

static int
replay_path(const char *path, size_t *count)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (stat(path, &st) < 0) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path, count);
	d = opendir(path);
	if (d == NULL) {
		perror(path);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		char sub[REPLAY_MAX_PATH];
		int l;

		if (de->d_name[0] == '.')
			continue;
		l = snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (l < 0 || (size_t)l >= sizeof(sub) || stat(sub, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (replay_file(sub, count) < 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int
main(int argc, char **argv)
{
	size_t count = 0;
	int rc = 0;

	for (int i = 1; i < argc; i++)
		if (replay_path(argv[i], &count) < 0)
			rc = 1;
	printf("replayed %zu inputs\n", count);
	if (count == 0) {
		fprintf(stderr, "no inputs\n");
		rc = 1;
	}
	return rc;
}
