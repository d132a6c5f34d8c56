# Operator handles. `make images` builds every image offline (see scripts/build_images.sh).
.PHONY: images engine up down

images:
	bash scripts/build_images.sh

engine:
	bash scripts/docker_engine.sh

up: images
	docker compose up -d --wait

down:
	docker compose down
