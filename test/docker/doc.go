// Package docker tests Cairn as containers: deploy/docker/compose.yml runs
// three nodes of the FROM-scratch image on a private Docker network, and the
// test makes its faults with Docker itself (`docker network disconnect`,
// `docker kill`) while the chaos lab's workload and checks run from the
// host. `make docker-test` builds the image and runs it; without the image
// (CAIRN_DOCKER_IMAGE) or a Docker engine the test skips and says why.
package docker
