package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// ImageEnv overrides the Redis image of the container harness.
const ImageEnv = "REDLOCK_REDIS_IMAGE"

// LocalImage is the tag of the image built from the host's redis-server.
const LocalImage = "redlock-redis:local"

// DefaultImage is the usual public Redis image.
const DefaultImage = "redis:7.4"

// EnsureImage returns an image the container harness can start without a
// registry: $REDLOCK_REDIS_IMAGE (default redis:7.4) if present locally or
// pullable within pullTimeout; otherwise it builds LocalImage FROM scratch
// out of the host's redis-server and the libraries ldd lists (the same as
// scripts/build-image.sh) and says so through logf.
func EnsureImage(ctx context.Context, cli client.APIClient, pullTimeout time.Duration, logf func(string, ...any)) (string, error) {
	img := os.Getenv(ImageEnv)
	if img == "" {
		img = DefaultImage
	}
	if _, err := cli.ImageInspect(ctx, img); err == nil {
		return img, nil
	}
	pctx, cancel := context.WithTimeout(ctx, pullTimeout)
	rc, err := cli.ImagePull(pctx, img, client.ImagePullOptions{})
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		_ = rc.Close()
	}
	cancel()
	if err == nil {
		if _, err = cli.ImageInspect(ctx, img); err == nil {
			return img, nil
		}
	}
	logf("harness: image %s not present and not pullable within %v (%v); building %s FROM scratch from the host's redis-server", img, pullTimeout, err, LocalImage)
	if _, err := cli.ImageInspect(ctx, LocalImage); err == nil {
		logf("harness: %s already built, using it", LocalImage)
		return LocalImage, nil
	}
	if err := BuildLocalImage(ctx, cli, LocalImage); err != nil {
		return "", err
	}
	logf("harness: built image %s", LocalImage)
	return LocalImage, nil
}

const dockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
`

// BuildLocalImage builds tag FROM scratch with the host's redis-server at
// /usr/bin/redis-server and every shared library ldd lists at its path.
func BuildLocalImage(ctx context.Context, cli client.APIClient, tag string) error {
	bin, err := ServerPath()
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return fmt.Errorf("harness: ldd %s: %w", bin, err)
	}
	files := map[string]string{"rootfs/usr/bin/redis-server": bin}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			files["rootfs"+f] = f
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("Dockerfile", 0o644, []byte(dockerfile)); err != nil {
		return err
	}
	for _, d := range []string{"rootfs/data/", "rootfs/tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o777, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for name, src := range files {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return err
		}
		if err := add(name, 0o755, data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("harness: build %s: %w", tag, err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(res.Body)
	if bytes.Contains(msg, []byte(`"error"`)) {
		return fmt.Errorf("harness: build %s: %s", tag, tail(msg))
	}
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		return fmt.Errorf("harness: build %s: image missing after build: %s", tag, tail(msg))
	}
	return nil
}
