/* fuzz_guest_listen.c - a guest's socket table (vmm/guest_listen.h), any
 * bytes a root user in the VM could make the agent hand back; the first
 * two bytes choose the port. The parse reads within the input only (an
 * exact heap copy) and answers one of the three states. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "vmm/guest_listen.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	int port;
	enum guest_listen s;

	if (size < 2)
		return 0;
	port = (data[0] << 8 | data[1]) % 65537;
	text = malloc(size - 2 + 1);
	if (text == NULL)
		return 0;
	memcpy(text, data + 2, size - 2);
	s = guest_listen_parse(text, size - 2, port);
	FUZZ_CHECK(s == GUEST_LISTEN_NONE || s == GUEST_LISTEN_LOOPBACK || s == GUEST_LISTEN_ANY);
	free(text);
	return 0;
}
