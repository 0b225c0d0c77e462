# The rewardbox service (API and worker), for docker-compose.yml. The sandbox image is separate (`make image`).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY service ./service
COPY sandboxes ./sandboxes
COPY graders ./graders
COPY trainer ./trainer
COPY rewardbox ./rewardbox
RUN pip install --no-cache-dir . && useradd --system --no-create-home rewardbox  # the API runs as it
EXPOSE 8000
CMD ["rewardbox", "serve", "--host", "0.0.0.0", "--port", "8000"]
